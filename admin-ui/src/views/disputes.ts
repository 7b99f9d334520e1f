import { paymentAdmin } from "../api";
import { h } from "../dom";
import { dateTime, money, shortId } from "../format";
import type { Dispute } from "../gen/billing/payment/payment_admin_pb";
import type { RouteContext } from "../router";
import { choice, listScreen } from "../list";
import { badge, field, idLink, type Column } from "../ui";

/** The dispute statuses Stripe reports; won and lost are final. */
const disputeStatuses = [
  "warning_needs_response",
  "warning_under_review",
  "warning_closed",
  "needs_response",
  "under_review",
  "won",
  "lost",
] as const;

const disputeColumns: Column<Dispute>[] = [
  { header: "Dispute", cell: (d) => h("code", { title: d.id }, d.gatewayDisputeId || shortId(d.id)) },
  { header: "Status", cell: (d) => badge(d.status) },
  { header: "Evidence due", cell: (d) => (d.evidenceDueBy ? dateTime(d.evidenceDueBy) : "—") },
  { header: "Amount", numeric: true, cell: (d) => money(d.amount, d.currency || undefined) },
  { header: "Reason", cell: (d) => d.reason || "—" },
  { header: "Payment", cell: (d) => idLink(`payments/${d.paymentId}`, d.paymentId) },
  { header: "Order", cell: (d) => (d.orderId ? idLink(`orders/${d.orderId}`, d.orderId) : "—") },
  { header: "Customer", cell: (d) => idLink(`customers/${d.customerId}`, d.customerId) },
];

/** The disputes queue (PaymentAdminService.ListDisputes): the payments'
 * chargebacks, the nearest evidence deadline first, each linked to its
 * payment, order and customer. */
export function disputesView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Disputes",
    intro:
      "A customer's bank disputes these payments. Answer each at the gateway (Stripe's dashboard) before its evidence deadline: an open dispute suspends its order's service, won resumes it, lost gives the money back.",
    what: "disputes",
    filters: { label: "Filter disputes", fields: [field("Status", choice(query, "status", disputeStatuses))] },
    load: async (q) => {
      const res = await paymentAdmin.listDisputes({ status: q.get("status"), limit: 500 }, { signal });
      return { rows: res.disputes };
    },
    caption: (q) => (q.get("status") ? `Disputes ${q.get("status")}` : "Disputes"),
    columns: disputeColumns,
    empty: (q) => (q.get("status") ? `No dispute is ${q.get("status")}.` : "No payment is disputed."),
  }).element;
}
