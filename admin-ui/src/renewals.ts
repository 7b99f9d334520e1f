// The renewal cycle of recurring orders in words and rules, pure so the
// unit tests hold the order page and the Renewals screen to them: which
// admin actions an order allows, what a suspension's reason means, and how
// long is left before an unpaid renewal's next step.

/** The statuses no transition leaves: the order's service is over. */
const finalStatuses: readonly string[] = ["cancelled", "refunded", "completed", "terminated"];

/** Whether the order is billed again and again (a billing cycle other than
 * one-time; a record of a server older than cycles has none). */
export function isRecurring(o: { billingCycle: string }): boolean {
  return o.billingCycle !== "" && o.billingCycle !== "one_time";
}

/** Whether its renewal can be turned off or on (SetOrderRenewal): a
 * recurring order whose service has not ended. */
export function canSetRenewal(o: { billingCycle: string; status: string }): boolean {
  return isRecurring(o) && !finalStatuses.includes(o.status);
}

/** What stands in the way of extending the current paid period by hand
 * (ExtendServicePeriod): null when nothing does (a running service whose
 * last period is paid), else why, in words. */
export function extendBlocked(o: { status: string }, periods: readonly { period: number; status: string; invoiceId: string }[]): string | null {
  if (o.status !== "active" && o.status !== "suspended") {
    return "Only a running service (active or suspended) can be extended.";
  }
  const last = periods.at(-1);
  if (!last) {
    return "The order has no service period yet.";
  }
  if (last.status !== "paid") {
    return `Period ${last.period} is invoiced and not paid${last.invoiceId ? ` (invoice ${last.invoiceId})` : ""}: its invoice must be paid or cancelled before the service can be extended.`;
  }
  return null;
}

/** An order's suspend_reason in words. */
export function suspendReasonText(reason: string): string {
  switch (reason) {
    case "overdue":
      return "overdue: a renewal invoice is unpaid; paying it resumes the service";
    case "admin":
      return "by an admin: only resuming it here brings the service back";
    default:
      return reason || "—";
  }
}

const day = 86_400_000;

/** Whole days left before an unpaid renewal's next step (suspension, or
 * the end of a suspended service), by the service's clock, not the
 * browser's (which a test clock leaves behind): the whole days from the
 * due time to nextStepAt, less the days already overdue and the day under
 * way. Never below 0; null when there is no next step or a time does not
 * parse. */
export function daysLeft(r: { dueAt: string; nextStepAt: string; daysOverdue: number }): number | null {
  if (!r.nextStepAt) return null;
  const due = Date.parse(r.dueAt);
  const next = Date.parse(r.nextStepAt);
  if (Number.isNaN(due) || Number.isNaN(next)) return null;
  return Math.max(0, Math.round((next - due) / day) - r.daysOverdue - 1);
}

/** daysLeft in words: "10 days left", "1 day left", "less than a day
 * left"; "" when there is no next step. */
export function daysLeftText(r: { dueAt: string; nextStepAt: string; daysOverdue: number }): string {
  const n = daysLeft(r);
  if (n === null) return "";
  if (n === 0) return "less than a day left";
  return `${n} ${n === 1 ? "day" : "days"} left`;
}

/** "1 service", "3 services". */
export function services(n: bigint | number): string {
  return `${n} ${n === 1n || n === 1 ? "service" : "services"}`;
}

/** The products an order may change plan to (ChangeOrderPlan): enabled,
 * recurring, in the order's currency, not its own. The server checks the
 * rest (the provider, the period). */
export function planTargets<P extends { id: string; enabled: boolean; billingCycle: string; currency: string }>(
  o: { productId: string; currency: string },
  products: readonly P[],
): P[] {
  return products.filter((p) => p.enabled && isRecurring(p) && p.currency === o.currency && p.id !== o.productId);
}

/** When a change of order o to product p may take effect: now only on the
 * same cycle; at the period end only while the order renews (the next
 * renewal bills the new plan). */
export function planWhens(o: { billingCycle: string; renews: boolean }, p: { billingCycle: string }): ("now" | "period_end")[] {
  const out: ("now" | "period_end")[] = [];
  if (p.billingCycle === o.billingCycle) out.push("now");
  if (o.renews) out.push("period_end");
  return out;
}

/** A plan change's money in words: what it bills or credits now, or what
 * the next renewal bills at the period end, as [label, amount]. */
export function planChangeMoney(c: { when: string; amount: string; credited: string; toPrice: string }): [string, string] {
  if (c.when === "period_end") return ["Next renewal bills", c.toPrice];
  if (c.amount.startsWith("-")) return ["Credited to the balance now", c.credited];
  return ["Billed now (prorated)", c.amount];
}

/** A saved-card charge attempt with the order and invoice it was for (the
 * Renewals screen's table). */
export interface ChargeRow<C> {
  orderId: string;
  invoiceId: string;
  charge: C;
}

/** The saved-card charges of every listed unpaid renewal invoice, newest
 * first (an invoice listed twice counted once). */
export function cardChargeRows<C extends { attempt: number; createdAt: string }>(
  lists: readonly (readonly { order?: { id: string }; invoiceId: string; cardCharges: readonly C[] }[])[],
): ChargeRow<C>[] {
  const seen = new Set<string>();
  const out: ChargeRow<C>[] = [];
  for (const list of lists) {
    for (const r of list) {
      if (seen.has(r.invoiceId)) continue;
      seen.add(r.invoiceId);
      for (const charge of r.cardCharges) out.push({ orderId: r.order?.id ?? "", invoiceId: r.invoiceId, charge });
    }
  }
  return out.sort((a, b) => Date.parse(b.charge.createdAt) - Date.parse(a.charge.createdAt) || b.charge.attempt - a.charge.attempt);
}

/** Which attempt a charge was: the due day's, or the n-th retry. */
export function attemptText(attempt: number): string {
  return attempt === 0 ? "due day" : `retry ${attempt}`;
}

/** Why a charge ended as it did: the gateway's code and message; while
 * the gateway's answer is awaited, that. */
export function chargeOutcomeText(c: { outcome: string; code: string; message: string }): string {
  if (!c.outcome) return "awaiting the gateway";
  return [c.code, c.message].filter(Boolean).join(": ");
}
