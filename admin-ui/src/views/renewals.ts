import { orderAdmin } from "../api";
import { h, type Child } from "../dom";
import { dateTime, money } from "../format";
import type { CardChargeAttempt, GetRenewalOverviewResponse, RenewalInvoice } from "../gen/billing/order/order_pb";
import { attemptText, cardChargeRows, chargeOutcomeText, daysLeftText, services, type ChargeRow } from "../renewals";
import type { RouteContext } from "../router";
import { badge, empty, idLink, loadBlock, pageTitle, table, type Column } from "../ui";
import { invoiceLink } from "./invoices";

/** How many days ahead "due" looks. */
const dueDays = 30;

function stat(label: string, value: string, testid: string, extra?: Child): HTMLElement {
  return h("div", { class: "stat" }, h("dt", null, label), h("dd", { "data-testid": testid }, value), extra ?? null);
}

/** What falls due in the window, per currency: the count of services
 * that renew and their renewal prices together. */
function dueFigures(res: GetRenewalOverviewResponse): HTMLElement {
  if (res.due.length === 0) {
    return empty(`Nothing renews in the next ${res.days} days.`);
  }
  return h(
    "dl",
    { class: "stats" },
    res.due.map((d) => stat(d.currency, money(d.amount, d.currency), `due-${d.currency}`, h("small", { "data-testid": `due-count-${d.currency}` }, `${services(d.count)} ${d.count === 1n ? "renews" : "renew"}`))),
  );
}

/** The invoice's id, short, with the whole id in its title. */
function invoiceCell(r: RenewalInvoice): HTMLElement {
  return invoiceLink(r.invoiceId);
}

/** The columns both lists share: the order, its customer, the unpaid
 * renewal invoice and what is still due on it, and how late it is. */
const unpaidColumns: Column<RenewalInvoice>[] = [
  { header: "Order", cell: (r) => idLink(`orders/${r.order!.id}`, r.order!.id) },
  { header: "Customer", cell: (r) => idLink(`customers/${r.order!.customerId}`, r.order!.customerId) },
  { header: "Invoice", cell: invoiceCell },
  { header: "Amount due", numeric: true, cell: (r) => money(r.amountDue, r.order!.currency) },
  { header: "Due", cell: (r) => dateTime(r.dueAt) },
  { header: "Days overdue", numeric: true, cell: (r) => String(r.daysOverdue) },
];

/** When the next step comes, and the whole days until it; never, in
 * words, when that step is turned off. */
function nextStep(r: RenewalInvoice, never: string): Child {
  if (!r.nextStepAt) {
    return never;
  }
  return [dateTime(r.nextStepAt), h("small", { class: "hint" }, daysLeftText(r))];
}

/** "N services …" above a list, and which of them the list shows when it
 * is capped. */
function listSummary(count: bigint, shown: number, testid: string, what: string, capped: string): HTMLElement {
  return h(
    "p",
    null,
    h("strong", { "data-testid": testid }, String(count)),
    ` ${count === 1n ? "service" : "services"} ${what}`,
    BigInt(shown) < count ? `; ${capped.replace("%d", String(shown))}` : "",
    ".",
  );
}

function overdueList(res: GetRenewalOverviewResponse): Child {
  if (res.overdueCount === 0n && res.overdue.length === 0) {
    return empty("No renewal invoice is past due.");
  }
  return [
    listSummary(res.overdueCount, res.overdue.length, "overdue-count", "with a renewal invoice past due", "the %d most overdue are listed"),
    table("Overdue renewals", [...unpaidColumns, { header: "Suspended on", cell: (r) => nextStep(r, "never") }], res.overdue),
  ];
}

function suspendedList(res: GetRenewalOverviewResponse): Child {
  if (res.suspendedCount === 0n && res.suspended.length === 0) {
    return empty("No service is suspended for non-payment.");
  }
  return [
    listSummary(res.suspendedCount, res.suspended.length, "suspended-count", "suspended for an unpaid renewal invoice", "the %d that end first are listed"),
    table("Suspended for non-payment", [...unpaidColumns, { header: "Ends", cell: (r) => nextStep(r, "not ended automatically") }], res.suspended),
  ];
}

/** The partly paid renewal invoices past their termination day: the
 * billing run does not end these services (cancelling the invoice would
 * strand the money paid), an admin decides. Alert
 * PaymentdRenewalPartlyPaidPastTermination points here. */
function partlyPaidList(res: GetRenewalOverviewResponse): Child {
  if (res.partlyPaidPastTerminationCount === 0n && res.partlyPaidPastTermination.length === 0) {
    return empty("No partly paid renewal invoice is past its termination day.");
  }
  return [
    listSummary(
      res.partlyPaidPastTerminationCount,
      res.partlyPaidPastTermination.length,
      "partly-paid-count",
      "with a partly paid renewal invoice past its termination day, left for an admin: refund what was paid, or take the rest",
      "the %d most overdue are listed",
    ),
    table("Partly paid past termination", unpaidColumns, res.partlyPaidPastTermination),
  ];
}

const chargeColumns: Column<ChargeRow<CardChargeAttempt>>[] = [
  { header: "Made", cell: (r) => dateTime(r.charge.createdAt) },
  { header: "Order", cell: (r) => idLink(`orders/${r.orderId}`, r.orderId) },
  { header: "Invoice", cell: (r) => invoiceLink(r.invoiceId) },
  { header: "Attempt", cell: (r) => attemptText(r.charge.attempt) },
  {
    header: "Outcome",
    cell: (r) => {
      const why = chargeOutcomeText(r.charge);
      return [badge(r.charge.outcome || "pending"), why ? [" ", h("small", { class: "hint" }, why)] : null];
    },
  },
  { header: "Payment", cell: (r) => idLink(`payments/${r.charge.paymentId}`, r.charge.paymentId) },
];

/** The charges of the customers' saved cards for the listed unpaid
 * renewal invoices (the due day's, then the retries), newest first. */
function chargesList(res: GetRenewalOverviewResponse): Child {
  const rows = cardChargeRows([res.overdue, res.suspended, res.partlyPaidPastTermination]);
  if (!rows.length) {
    return empty("No saved card was charged for a listed invoice.");
  }
  return table("Saved-card charges", chargeColumns, rows);
}

/** The renewal cycle at a glance (OrderAdminService.GetRenewalOverview), by the
 * billing clock: what falls due in the next 30 days, the active services
 * whose renewal invoice is past due with the day each is suspended, the
 * services suspended for non-payment with the day each ends, the saved-card
 * charges made for those invoices, and the partly paid renewal invoices past the termination day left for an admin. */
export function renewalsView({ signal }: RouteContext): HTMLElement {
  return h(
    "section",
    null,
    pageTitle("Renewals", h("p", { class: "subtitle" }, "Recurring orders: what falls due, what is past due, and what is suspended for non-payment.")),
    loadBlock("renewals", async () => {
      const res = await orderAdmin.getRenewalOverview({ days: dueDays }, { signal });
      return h(
        "div",
        { class: "cards" },
        h("section", { class: "card card-wide", "aria-labelledby": "renewals-due" }, h("h2", { id: "renewals-due" }, `Due in the next ${res.days} days`), dueFigures(res)),
        h("section", { class: "card card-wide", "aria-labelledby": "renewals-overdue" }, h("h2", { id: "renewals-overdue" }, "Overdue"), overdueList(res)),
        h(
          "section",
          { class: "card card-wide", "aria-labelledby": "renewals-suspended" },
          h("h2", { id: "renewals-suspended" }, "Suspended for non-payment"),
          suspendedList(res),
        ),
        h(
          "section",
          { class: "card card-wide", "aria-labelledby": "renewals-charges" },
          h("h2", { id: "renewals-charges" }, "Saved-card charges"),
          chargesList(res),
        ),
        h(
          "section",
          { class: "card card-wide", "aria-labelledby": "renewals-partly-paid" },
          h("h2", { id: "renewals-partly-paid" }, "Partly paid past termination"),
          partlyPaidList(res),
        ),
      );
    }),
  );
}
