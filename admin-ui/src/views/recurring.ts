// The dashboard's recurring revenue card: GetRecurringRevenue drawn as the
// trends are (uPlot, one chart per currency: MRR at each day's end and
// what moved it, the figures as a table under it), with a table beside
// each chart of the range's movements (start + new + expansion −
// contraction − churn + reactivation = end) and of the renewals,
// suspensions and terminations of the next 7 and 30 days.

import { paymentAdmin } from "../api";
import { h } from "../dom";
import type { CurrencyRecurringRevenue, GetRecurringRevenueResponse, MrrFigure } from "../gen/billing/payment/payment_admin_pb";
import { browserZone, mrrCharts, trendRange } from "../trends";
import { empty, table } from "../ui";
import { chartFigure, rangeCard } from "./trends";

function figure(f: MrrFigure | undefined): string {
  return f ? `${f.amount} (${f.services})` : "0.00 (0)";
}

function movementsTable(c: CurrencyRecurringRevenue): HTMLElement {
  const m = c.movements;
  const rows: [string, string][] = [
    ["MRR at the start", figure(c.start)],
    ["+ New", figure(m?.newBusiness)],
    ["+ Expansion", figure(m?.expansion)],
    ["− Contraction", figure(m?.contraction)],
    ["− Churn", figure(m?.churn)],
    ["+ Reactivation", figure(m?.reactivation)],
    ["MRR at the end", figure(c.end)],
  ];
  return h(
    "div",
    { "data-testid": `mrr-movements-${c.currency}` },
    table(
      `MRR movements over the range (${c.currency}), amount (services)`,
      [
        { header: `${c.currency} MRR`, cell: (r: [string, string]) => r[0] },
        { header: "Amount (services)", numeric: true, cell: (r: [string, string]) => r[1] },
      ],
      rows,
    ),
  );
}

function aheadTable(c: CurrencyRecurringRevenue, res: GetRecurringRevenueResponse): HTMLElement {
  const step = (what: string, days: number) => (days === 0 ? `${what}: off` : `${what} ${days} days past due`);
  return h(
    "div",
    { "data-testid": `mrr-ahead-${c.currency}` },
    table(
      `Renewals, suspensions and terminations ahead (${c.currency}), amount (services)`,
      [
        { header: "Next", cell: (a) => `${a.days} d` },
        { header: "Renewals", numeric: true, cell: (a) => `${a.renewalsAmount} (${a.renewals})` },
        { header: "Suspended", numeric: true, cell: (a) => `${a.suspensionsAmount} (${a.suspensions})` },
        { header: "Terminated", numeric: true, cell: (a) => `${a.terminationsAmount} (${a.terminations})` },
      ],
      c.ahead,
    ),
    h("p", { class: "chart-range" }, `${step("Suspended", res.suspendAfterDays)}; ${step("terminated", res.terminateAfterDays)}.`),
  );
}

function render(res: GetRecurringRevenueResponse): HTMLElement[] {
  const range = h("p", { class: "chart-range" }, `${res.from} to ${res.to} (${res.timeZone}); MRR is each live recurring order's renewal price per month`);
  if (res.currencies.length === 0) {
    return [range, empty("No recurring service in these days.")];
  }
  const charts = mrrCharts(res);
  return [
    range,
    ...res.currencies.map((c, i) =>
      h("div", { class: "mrr-currency", "data-currency": c.currency }, chartFigure(charts[i]!), h("div", { class: "mrr-tables" }, movementsTable(c), aheadTable(c, res))),
    ),
  ];
}

/** The recurring revenue card: the range switch, then per currency the
 * MRR chart and its tables. */
export function recurringCard(signal: AbortSignal): HTMLElement {
  return rangeCard("dash-recurring", "Recurring revenue", "recurring revenue", async (days) =>
    render(await paymentAdmin.getRecurringRevenue({ ...trendRange(days), timeZone: browserZone() }, { signal })),
  );
}
