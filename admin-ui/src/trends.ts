// The dashboard's trends (PaymentAdminService.GetPaymentTrends) as chart
// series: pure functions, so the unit tests and the browser test can hold
// the charts to the service's figures.

import type {
  GetPaymentTrendsResponse,
  GetRecurringRevenueResponse,
  MrrDay,
  MrrMovements,
} from "./gen/billing/payment/payment_admin_pb";

/** The ranges the dashboard offers, in days. */
export const trendRanges = [7, 30, 90] as const;
export type TrendDays = (typeof trendRanges)[number];

function isoDate(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** The last `days` local days up to today, as GetPaymentTrends' from and
 * to (YYYY-MM-DD in the browser's zone). */
export function trendRange(days: number, now: Date = new Date()): { from: string; to: string } {
  const first = new Date(now.getFullYear(), now.getMonth(), now.getDate() - (days - 1));
  return { from: isoDate(first), to: isoDate(now) };
}

/** The browser's IANA zone, which cuts the days; UTC when it has none. */
export function browserZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
}

/** A chart's series: one value per day (null: nothing to plot that day),
 * and the exact text the table shows for it. */
export interface Series {
  label: string;
  values: (number | null)[];
  texts: string[];
}

export interface Chart {
  /** Stable id: "money-CNY", "success-rate". */
  id: string;
  title: string;
  unit: string;
  days: string[];
  series: Series[];
}

/** A decimal string of the service ("12.30") as a number to plot; the
 * table keeps the exact string. */
function plotted(amount: string): number {
  return Number(amount);
}

/** Per currency: the money received and refunded each day. */
export function moneyCharts(res: GetPaymentTrendsResponse): Chart[] {
  return res.currencies.map((c) => ({
    id: `money-${c.currency}`,
    title: `Received and refunded per day (${c.currency})`,
    unit: c.currency,
    days: res.days,
    series: [
      { label: "Received", values: c.days.map((d) => plotted(d.received)), texts: c.days.map((d) => d.received) },
      { label: "Refunded", values: c.days.map((d) => plotted(d.refunded)), texts: c.days.map((d) => d.refunded) },
    ],
  }));
}

/** A rate from 0 to 1 as a percentage with one decimal, "—" when absent. */
export function ratePercent(rate: number | undefined): string {
  return rate === undefined ? "—" : `${(rate * 100).toFixed(1)} %`;
}

/** The success rate of each gateway interface's payments created each day,
 * in percent; a day without decided payments has no point. */
export function successRateChart(res: GetPaymentTrendsResponse): Chart | null {
  if (res.gateways.length === 0) {
    return null;
  }
  return {
    id: "success-rate",
    title: "Success rate per gateway (payments created that day)",
    unit: "%",
    days: res.days,
    series: res.gateways.map((g) => ({
      label: g.name,
      values: g.days.map((d) => (d.successRate === undefined ? null : d.successRate * 100)),
      texts: g.days.map((d) => ratePercent(d.successRate)),
    })),
  };
}

/** Seconds as the shortest readable duration: "42 s", "3 min 5 s", "2 h 10 min". */
export function duration(seconds: number | undefined): string {
  if (seconds === undefined) {
    return "—";
  }
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** Per currency: MRR at each day's end and what moved it that day
 * (PaymentAdminService.GetRecurringRevenue). Expansion and contraction are
 * drawn only once plan changes move them. */
export function mrrCharts(res: GetRecurringRevenueResponse): Chart[] {
  return res.currencies.map((c) => {
    const pick = (label: string, f: (d: MrrDay) => string): Series => ({
      label,
      values: c.days.map((d) => plotted(f(d))),
      texts: c.days.map((d) => f(d)),
    });
    const mv = (d: MrrDay) => d.movements;
    const series: Series[] = [
      pick("MRR", (d) => d.mrr?.amount ?? "0.00"),
      pick("New", (d) => mv(d)?.newBusiness?.amount ?? "0.00"),
      pick("Churn", (d) => mv(d)?.churn?.amount ?? "0.00"),
      pick("Reactivation", (d) => mv(d)?.reactivation?.amount ?? "0.00"),
    ];
    const moved = (f: (m: MrrMovements) => string | undefined) => c.movements !== undefined && (f(c.movements) ?? "0.00") !== "0.00";
    if (moved((m) => m.expansion?.amount)) series.push(pick("Expansion", (d) => mv(d)?.expansion?.amount ?? "0.00"));
    if (moved((m) => m.contraction?.amount)) series.push(pick("Contraction", (d) => mv(d)?.contraction?.amount ?? "0.00"));
    return { id: `mrr-${c.currency}`, title: `Monthly recurring revenue per day (${c.currency})`, unit: c.currency, days: res.days, series };
  });
}
