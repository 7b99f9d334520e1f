// An invoice's page: its facts and the lines it bills.

import { orders } from "../api";
import { h, replace, type Child } from "../dom";
import { dateTime, money } from "../format";
import type { Invoice, InvoiceLine } from "../gen/billing/order/order_pb";
import type { RouteContext } from "../router";
import { badge, empty, facts, link, loadBlock, pageTitle, table, type Column } from "../ui";
import { auditLink } from "./audit";

/** A link to an invoice's page: its short id, the whole id in the code's title. */
export function invoiceLink(id: string): HTMLElement {
  return link(`invoices/${id}`, h("code", { title: id }, id.slice(0, 8)));
}

export function invoiceDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  replace(
    body,
    loadBlock("invoice", async () => {
      const { invoice } = await orders.getInvoice({ id }, { signal });
      const inv = invoice!;
      return h(
        "div",
        { class: "detail" },
        h("section", { class: "card", "aria-labelledby": "invoice-facts" }, h("h2", { id: "invoice-facts" }, "Details"), facts(invoiceFacts(inv))),
        h(
          "section",
          { class: "card", "aria-labelledby": "invoice-lines" },
          h("h2", { id: "invoice-lines" }, "Lines"),
          inv.lines.length ? table("Lines of this invoice", lineColumns(inv.currency), inv.lines) : empty("This invoice has no lines."),
        ),
      );
    }),
  );
  return h("section", null, pageTitle("Invoice", h("p", { class: "subtitle" }, h("code", null, id)), h("p", { class: "card-links" }, auditLink("invoice", id, "This invoice in the audit log"))), body);
}

function invoiceFacts(i: Invoice): [string, Child][] {
  return [
    ["Number", h("span", { "data-testid": "invoice-number" }, i.number)],
    ["Status", badge(i.status)],
    ["Amount", h("span", { "data-testid": "invoice-amount" }, money(i.amount, i.currency))],
    ["Paid", money(i.paidAmount, i.currency)],
    ["Customer", link(`customers/${i.customerId}`, h("code", null, i.customerId))],
    ["Order", i.orderId ? link(`orders/${i.orderId}`, h("code", null, i.orderId)) : ""],
    ["Description", i.description],
    ["Issued", dateTime(i.issuedAt)],
    ["Due", dateTime(i.dueAt)],
    ["Paid at", dateTime(i.paidAt)],
  ];
}

/** The period a line bills, start to end; "—" for a line of no period. */
export function linePeriod(l: Pick<InvoiceLine, "periodStart" | "periodEnd">): string {
  return l.periodStart ? `${dateTime(l.periodStart)} – ${dateTime(l.periodEnd)}` : "—";
}

function lineColumns(currency: string): Column<InvoiceLine>[] {
  return [
    { header: "#", numeric: true, cell: (l) => String(l.position) },
    { header: "Description", cell: (l) => l.description || "—" },
    { header: "Period", cell: (l) => linePeriod(l) },
    { header: "Quantity", numeric: true, cell: (l) => String(l.quantity) },
    { header: "Unit amount", numeric: true, cell: (l) => money(l.unitAmount, currency) },
    { header: "Amount", numeric: true, cell: (l) => money(l.amount, currency) },
  ];
}
