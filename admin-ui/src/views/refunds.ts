import { paymentAdmin } from "../api";
import { h } from "../dom";
import { age, dateTime, money, shortId } from "../format";
import type { Refund } from "../gen/billing/payment/payment_pb";
import { exportForm } from "../export_form";
import { refundsNone } from "../refund_outcome";
import { setQuery, type RouteContext } from "../router";
import { badge, empty, field, idLink, loadBlock, pager, pageTitle, table, type Column } from "../ui";

export const refundStatuses = ["pending", "succeeded", "failed"] as const;

function pageOf(q: URLSearchParams): number {
  const n = Number.parseInt(q.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

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
    { header: "Requested by", cell: (r) => (r.requestedBy ? h("code", { title: r.requestedBy }, shortId(r.requestedBy)) : "system") },
  ];
}

/** Every payment's refunds, newest first, filtered by status and paged
 * (PaymentAdminService.ListRefunds without a payment). The dashboard's
 * pending refunds lead here with status=pending; each refund links to its
 * payment, where "Record outcome…" records what the gateway did. */
export function refundsView({ query, signal }: RouteContext): HTMLElement {
  const current = query.get("status") ?? "";
  const status = h(
    "select",
    { name: "status" },
    h("option", { value: "" }, "Any"),
    refundStatuses.map((s) => h("option", { value: s, selected: current === s }, s)),
  );
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter refunds" },
    field("Status", status),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ status: status.value, page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ status: undefined, page: undefined });
  });

  const list = loadBlock("refunds", async () => {
    const res = await paymentAdmin.listRefunds(
      { status: current || undefined, pagination: { page: pageOf(query), pageSize: 20 } },
      { signal },
    );
    if (res.refunds.length === 0) {
      return empty(refundsNone(current, pageOf(query)));
    }
    return [
      table(current ? `Refunds ${current}` : "Refunds", refundColumns(new Date().toISOString()), res.refunds),
      pager(res.meta, (p) => setQuery({ page: String(p) })),
    ];
  });
  return h(
    "section",
    null,
    pageTitle(
      "Refunds",
      h(
        "p",
        { class: "subtitle" },
        "A pending refund waits for its gateway, or for an admin to check it there (a bank transfer is sent back by hand): open its payment and record what happened with “Record outcome…”.",
      ),
    ),
    form,
    exportForm("refunds", { status: current || undefined }),
    list,
  );
}
