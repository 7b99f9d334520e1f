// The console's idempotency keys for the calls that move money.

/**
 * The Idempotency-Key of one money form (a refund, a transfer confirmation,
 * a balance adjustment, a refund's outcome). The same request sent again
 * from the same form (a second click, a retry after the answer was lost)
 * carries the same key, so the service does it once and answers the first
 * outcome again; a changed request gets a new key. A new form (the page
 * reloaded after an answer) starts with a new key.
 */
export class MoneyKey {
  private last = "";
  private key = "";

  /** The call options that carry the key for request. */
  options(request: object): { headers: Record<string, string> } {
    const body = JSON.stringify(request, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
    if (body !== this.last || this.key === "") {
      this.last = body;
      this.key = newKey();
    }
    return { headers: { "Idempotency-Key": this.key } };
  }
}

// newKey is 128 random bits in hex: crypto.getRandomValues works on plain
// http too, where crypto.randomUUID does not exist.
function newKey(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
