// Formatting of the service's values. Money arrives as a decimal string with
// two fractional digits ("12.30") and is never turned into a float: sums and
// comparisons are done on integer cents (bigint).

const moneyPattern = /^(-)?(\d{1,12})(?:\.(\d{1,2}))?$/;

/** Parses "12.3" or "-0.05" into cents; null when it is not a decimal with at most two fractional digits. */
export function toCents(s: string): bigint | null {
  const m = moneyPattern.exec(s.trim());
  if (!m) {
    return null;
  }
  const units = BigInt(m[2] ?? "0");
  const frac = BigInt((m[3] ?? "").padEnd(2, "0"));
  const cents = units * 100n + frac;
  return m[1] ? -cents : cents;
}

/** Formats cents as "12.30". */
export function fromCents(c: bigint): string {
  const neg = c < 0n;
  const abs = neg ? -c : c;
  const units = abs / 100n;
  const frac = (abs % 100n).toString().padStart(2, "0");
  return `${neg ? "-" : ""}${units}.${frac}`;
}

/** "12.30 CNY"; an amount that does not parse is shown as it came. */
export function money(amount: string, currency?: string): string {
  const c = toCents(amount);
  const text = c === null ? amount : fromCents(c);
  return currency ? `${text} ${currency}` : text;
}

/** Amount still refundable: amount − refunded, never below zero. */
export function refundable(amount: string, refunded: string): bigint {
  const a = toCents(amount) ?? 0n;
  const r = toCents(refunded || "0") ?? 0n;
  return a > r ? a - r : 0n;
}

function pad(n: number): string {
  return n.toString().padStart(2, "0");
}

/** A zone's offset from UTC, in minutes east, as "UTC", "UTC+8",
 * "UTC-3" or "UTC+5:30". */
export function utcOffset(minutesEast: number): string {
  if (!Number.isFinite(minutesEast) || minutesEast === 0) {
    return "UTC";
  }
  const abs = Math.abs(Math.round(minutesEast));
  const hours = Math.floor(abs / 60);
  const mins = abs % 60;
  return `UTC${minutesEast < 0 ? "-" : "+"}${hours}${mins ? `:${pad(mins)}` : ""}`;
}

/** An RFC 3339 time in the browser's time zone with that zone's offset at
 * that instant: "2026-11-27 14:03:05 UTC+8"; "—" when empty, the text as it
 * came when it is not a time. Every time the console shows goes through
 * here, so none is read in the wrong zone. */
export function dateTime(rfc3339: string): string {
  if (!rfc3339) {
    return "—";
  }
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) {
    return rfc3339;
  }
  // getTimezoneOffset is minutes west of UTC, for this instant (summer time
  // included).
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${utcOffset(-d.getTimezoneOffset())}`;
}

/** The first 8 characters of a UUID, for tables; the full id goes in a title. */
export function shortId(id: string): string {
  return id ? id.slice(0, 8) : "—";
}

/** The transfer reference of a payment: what a bank-transfer customer is
 * told to quote, the first 8 characters of its id in upper case (the
 * bank_transfer plugin's rule; ListPayments searches by it). */
export function transferReference(paymentId: string): string {
  return paymentId.slice(0, 8).toUpperCase();
}

/** A rate from 0 to 1 (the service's success rate) in percent with one
 * decimal, or "—" when there is none (nothing was decided). */
export function percent(rate: number | undefined): string {
  if (rate === undefined || !Number.isFinite(rate)) {
    return "—";
  }
  return `${(rate * 100).toFixed(1)} %`;
}

/** Start of the local day containing now. */
export function startOfToday(now: Date = new Date()): Date {
  return new Date(now.getFullYear(), now.getMonth(), now.getDate());
}

/** Pretty-prints a JSON text; returns it unchanged when it is not JSON. */
export function prettyJSON(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** How long from one RFC 3339 time to another, in the two largest units
 * ("45 s", "12 min", "3 h 5 min", "2 d 4 h"); "—" when either does not
 * parse. A negative span (clocks apart) counts as none. */
export function age(from: string, to: string): string {
  const a = Date.parse(from);
  const b = Date.parse(to);
  if (!from || !to || Number.isNaN(a) || Number.isNaN(b)) {
    return "—";
  }
  const s = Math.max(0, Math.floor((b - a) / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  const hours = Math.floor(min / 60);
  if (hours < 24) return min % 60 ? `${hours} h ${min % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** An RFC 3339 time as the value of a datetime-local input in the admin's
 * time zone, to the minute ("2026-12-08T10:30"); "" when empty or when it
 * does not parse. */
export function toLocalInput(rfc3339: string): string {
  const d = new Date(rfc3339);
  if (!rfc3339 || Number.isNaN(d.getTime())) {
    return "";
  }
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A datetime-local input's value (the admin's time zone) as RFC 3339 in
 * UTC; null when it is empty or not a time. */
export function fromLocalInput(value: string): string | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value)) {
    return null;
  }
  // Without a zone, Date reads a date-time as local time.
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/** The admin's time zone, as the browser names it ("Europe/Berlin"). */
export function timeZoneName(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}
