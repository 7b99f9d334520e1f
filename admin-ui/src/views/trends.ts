// The dashboard's trends card: uPlot charts of GetPaymentTrends — the money
// received and refunded per day (per currency) and each gateway's success
// rate — over 7, 30 or 90 days in the browser's zone. Colour is never the
// only cue: every series has its own dash pattern and point size, and its
// name in the legend, which shows the figures of the day under the
// pointer. Each chart has its figures as a table under it, always in the
// document: visually hidden until "Show the figures" shows it, so a screen
// reader reads the figures without opening anything (a closed <details>
// hid them from it); the browser test checks the chart against it.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { paymentAdmin } from "../api";
import { h, replace } from "../dom";
import type { GetPaymentTrendsResponse } from "../gen/billing/payment/payment_admin_pb";
import {
  browserZone,
  duration,
  moneyCharts,
  ratePercent,
  successRateChart,
  trendRange,
  trendRanges,
  type Chart,
  type TrendDays,
} from "../trends";
import { empty, loadBlock, table } from "../ui";

/** Line styles told apart without colour: dash pattern and point size. */
const styles: { dash: number[]; points: number; colour: string }[] = [
  { dash: [], points: 6, colour: "#1f6feb" },
  { dash: [8, 4], points: 8, colour: "#cf222e" },
  { dash: [2, 3], points: 5, colour: "#1a7f37" },
  { dash: [12, 3, 3, 3], points: 7, colour: "#9a6700" },
];

function cssVar(name: string, fallback: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

/** Day strings (YYYY-MM-DD) as uPlot's x values: seconds at UTC midnight,
 * shown in UTC so the axis says the same date as the table. */
function xValues(days: string[]): number[] {
  return days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
}

function plot(chart: Chart, box: HTMLElement): uPlot {
  const text = cssVar("--text", "#1b1f24");
  const grid = cssVar("--border", "#d0d7de");
  const fmt = (v: number | null | undefined) =>
    v === null || v === undefined ? "—" : chart.unit === "%" ? `${v.toFixed(1)} %` : `${v.toFixed(2)} ${chart.unit}`;
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const opts: uPlot.Options = {
    width: Math.max(box.clientWidth, 120),
    height: 220,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    cursor: { points: { size: 9 } },
    legend: { live: true },
    scales: { x: { time: true }, y: chart.unit === "%" ? { range: [0, 100] } : { range: (_u, _min, max) => [0, Math.max(max, 1) * 1.1] } },
    axes: [
      { ...axis, space: 60 },
      { ...axis, size: 70, values: (_u, vals) => vals.map((v) => (chart.unit === "%" ? `${v} %` : String(v))) },
    ],
    series: [
      { label: "Day", value: (_u, ts) => (ts === null || ts === undefined ? "—" : new Date(ts * 1000).toISOString().slice(0, 10)) },
      ...chart.series.map((s, i) => {
        const st = styles[i % styles.length]!;
        return {
          label: s.label,
          stroke: st.colour,
          width: 2,
          dash: st.dash,
          spanGaps: false,
          points: { show: true, size: st.points, fill: st.colour, stroke: st.colour },
          value: (_u: uPlot, v: number | null) => fmt(v),
        };
      }),
    ],
  };
  const u = new uPlot(opts, [xValues(chart.days), ...chart.series.map((s) => s.values)] as uPlot.AlignedData, box);
  new ResizeObserver(() => {
    const w = Math.max(box.clientWidth, 120);
    if (w !== u.width) u.setSize({ width: w, height: 220 });
  }).observe(box);
  return u;
}

/** The chart's figures as a table: read by screen readers where it stands,
 * shown on the page by a toggle (aria-expanded says whether it shows). */
function chartTable(chart: Chart): HTMLElement[] {
  const id = `chart-table-${chart.id}`;
  const wrap = h(
    "div",
    { id, class: "chart-table visually-hidden" },
    table(
      chart.title,
      [
        { header: "Day", cell: (i: number) => chart.days[i] },
        ...chart.series.map((s) => ({ header: s.label, numeric: true, cell: (i: number) => s.texts[i] })),
      ],
      chart.days.map((_d, i) => i),
    ),
  );
  const toggle = h("button", { type: "button", class: "chart-table-toggle", "aria-controls": id, "aria-expanded": "false" }, "Show the figures as a table");
  toggle.addEventListener("click", () => {
    const shown = wrap.classList.toggle("visually-hidden") === false;
    toggle.setAttribute("aria-expanded", String(shown));
    toggle.textContent = shown ? "Hide the table" : "Show the figures as a table";
  });
  return [toggle, wrap];
}

/** One chart with its caption, the plot, and its figures as a table. The
 * plot's data is written on the element too (data-points: the values given
 * to uPlot, per series), for the browser test. */
export function chartFigure(chart: Chart): HTMLElement {
  const headingId = `chart-${chart.id}`;
  const box = h("div", { class: "chart-plot" });
  const figure = h(
    "figure",
    {
      class: "chart",
      "data-chart": chart.id,
      "data-points": JSON.stringify({ days: chart.days, series: chart.series.map((s) => ({ label: s.label, values: s.values })) }),
      "aria-labelledby": headingId,
    },
    h("figcaption", { id: headingId }, chart.title),
    box,
    ...chartTable(chart),
  );
  // uPlot measures its box: plot once the figure is in the page.
  requestAnimationFrame(() => {
    if (box.isConnected) plot(chart, box);
  });
  return figure;
}

function gatewayTable(res: GetPaymentTrendsResponse): HTMLElement {
  return table(
    "Gateways over the range",
    [
      { header: "Gateway", cell: (g) => g.name },
      { header: "Payments", numeric: true, cell: (g) => String(g.created) },
      { header: "Succeeded", numeric: true, cell: (g) => String(g.succeeded) },
      { header: "Failed", numeric: true, cell: (g) => String(g.failed) },
      { header: "Success rate", numeric: true, cell: (g) => ratePercent(g.successRate) },
      { header: "Median time to success", numeric: true, cell: (g) => duration(g.medianSecondsToSuccess) },
    ],
    res.gateways,
  );
}

function render(res: GetPaymentTrendsResponse): HTMLElement[] {
  const money = moneyCharts(res);
  const rate = successRateChart(res);
  if (money.length === 0 && !rate) {
    return [h("p", { class: "chart-range" }, rangeText(res)), empty("No payment in these days.")];
  }
  return [
    h("p", { class: "chart-range" }, rangeText(res)),
    ...money.map(chartFigure),
    rate ? chartFigure(rate) : empty("No payment through a gateway in these days."),
    rate ? gatewayTable(res) : null,
  ].filter((x): x is HTMLElement => x !== null);
}

function rangeText(res: GetPaymentTrendsResponse): string {
  return `${res.from} to ${res.to} (${res.timeZone})`;
}

/** The trends card: the range switch, then the charts of the chosen range. */
export function trendsCard(signal: AbortSignal): HTMLElement {
  return rangeCard("dash-trends", "Trends", "trends", async (days) =>
    render(await paymentAdmin.getPaymentTrends({ ...trendRange(days), timeZone: browserZone() }, { signal })),
  );
}

/** A dashboard card with a range switch of trendRanges (30 days first):
 * body draws the chosen range, again at each switch. */
export function rangeCard(id: string, title: string, what: string, body: (days: TrendDays) => Promise<HTMLElement[]>): HTMLElement {
  const box = h("div", { class: "trends-body" });
  let chosen: TrendDays = 30;
  const buttons = trendRanges.map((days) =>
    h(
      "button",
      {
        type: "button",
        "aria-pressed": String(days === chosen),
        "data-days": days,
        onclick: () => {
          chosen = days;
          for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.days === String(days)));
          load();
        },
      },
      `${days} days`,
    ),
  );
  const load = () => replace(box, loadBlock(what, () => body(chosen)));
  load();
  return h(
    "section",
    { class: "card card-wide", "aria-labelledby": id },
    h("div", { class: "card-head" }, h("h2", { id }, title), h("div", { class: "range-switch", role: "group", "aria-label": "Range" }, buttons)),
    box,
  );
}
