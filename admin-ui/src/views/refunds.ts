import { paymentAdmin } from "../api";
import { h } from "../dom";
import { age, dateTime, money, shortId } from "../format";
import type { Refund } from "../gen/billing/payment/payment_pb";
import { exportForm } from "../export_form";
import { refundsNone } from "../refund_outcome";
import type { RouteContext } from "../router";
import { choice, listScreen } from "../list";
import { ListRefundsRequestAllowed } from "../gen/billing/payment/payment_admin_allowed";
import { badge, field, idLink, requestedBy, type Column } from "../ui";

/** The columns of a list of refunds across payments; ages are counted up
 * to now, the moment the page was loaded. */
function refundColumns(now: string): Column<Refund>[] {
  return [
    { header: "Refund", cell: (r) => h("code", { title: r.id }, shortId(r.id)) },
    { header: "Status", cell: (r) => badge(r.status) },
    // A server without Refund.currency gives none: the payment says it.
    { header: "Amount", numeric: true, cell: (r) => money(r.amount, r.currency || undefined) },
    { header: "Payment", cell: (r) => idLink(`payments/${r.paymentId}`, r.paymentId) },
    { header: "Age", cell: (r) => h("span", { title: `requested ${dateTime(r.createdAt)}` }, age(r.createdAt, now)) },
    { header: "Reason", cell: (r) => r.reason || "—" },
    // What the gateway asked for (a bank transfer to send back by hand),
    // why the outcome is unknown, or why it failed.
    { header: "Message", cell: (r) => r.message || r.error || "—" },
    { header: "Requested by", cell: (r) => requestedBy(r) },
  ];
}

/** Every payment's refunds, newest first, filtered by status and paged
 * (PaymentAdminService.ListRefunds without a payment). The dashboard's
 * pending refunds lead here with status=pending; each refund links to its
 * payment, where "Record outcome…" records what the gateway did. */
export function refundsView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Refunds",
    intro:
      "A pending refund waits for its gateway, or for an admin to check it there (a bank transfer is sent back by hand): open its payment and record what happened with “Record outcome…”.",
    what: "refunds",
    filters: { label: "Filter refunds", fields: [field("Status", choice(query, "status", ListRefundsRequestAllowed.status))] },
    aboveList: exportForm("refunds", { status: query.get("status") || undefined }),
    load: async (q) => {
      const res = await paymentAdmin.listRefunds({ status: q.get("status"), pagination: q.pagination }, { signal });
      return { rows: res.refunds, meta: res.meta };
    },
    caption: (q) => (q.get("status") ? `Refunds ${q.get("status")}` : "Refunds"),
    columns: refundColumns(new Date().toISOString()),
    empty: (q) => refundsNone(q.get("status") ?? "", q.page),
  }).element;
}
