import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";

import { GetPaymentTrendsResponseSchema, GetRecurringRevenueResponseSchema } from "./gen/billing/payment/payment_admin_pb";
import { duration, moneyCharts, mrrCharts, successRateChart, trendRange } from "./trends";

describe("trend ranges", () => {
  it("ends today and counts today in", () => {
    expect(trendRange(7, new Date(2026, 2, 3, 23, 59))).toEqual({ from: "2026-02-25", to: "2026-03-03" });
    expect(trendRange(1, new Date(2026, 0, 1, 0, 0))).toEqual({ from: "2026-01-01", to: "2026-01-01" });
  });
});

describe("trend series", () => {
  const res = create(GetPaymentTrendsResponseSchema, {
    days: ["2026-03-01", "2026-03-02"],
    currencies: [
      {
        currency: "CNY",
        days: [
          { day: "2026-03-01", received: "30.00", refunded: "0.00" },
          { day: "2026-03-02", received: "0.10", refunded: "4.00" },
        ],
      },
    ],
    gateways: [{ name: "Alipay", days: [{ day: "2026-03-01", successRate: 0.75 }, { day: "2026-03-02" }] }],
  });

  it("plots the received and refunded money of each currency, and keeps the exact text", () => {
    const [cny] = moneyCharts(res);
    expect(cny!.id).toBe("money-CNY");
    expect(cny!.series.map((s) => [s.label, s.values, s.texts])).toEqual([
      ["Received", [30, 0.1], ["30.00", "0.10"]],
      ["Refunded", [0, 4], ["0.00", "4.00"]],
    ]);
  });

  it("plots each gateway's success rate in percent, no point where nothing was decided", () => {
    const chart = successRateChart(res)!;
    expect(chart.series).toEqual([{ label: "Alipay", values: [75, null], texts: ["75.0 %", "—"] }]);
  });

  it("writes durations shortly", () => {
    expect([duration(undefined), duration(2), duration(185), duration(7800)]).toEqual(["—", "2 s", "3 min 5 s", "2 h 10 min"]);
  });
});

describe("recurring revenue series", () => {
  const zero = { services: 0n, amount: "0.00" };
  const moves = (n: string, churn: string) => ({
    newBusiness: { services: 1n, amount: n },
    expansion: zero,
    contraction: zero,
    churn: { services: 1n, amount: churn },
    reactivation: zero,
  });
  const res = create(GetRecurringRevenueResponseSchema, {
    days: ["2027-01-01", "2027-01-02"],
    currencies: [
      {
        currency: "CNY",
        movements: moves("18.33", "10.00"),
        days: [
          { day: "2027-01-01", mrr: { services: 2n, amount: "18.33" }, movements: moves("18.33", "0.00") },
          { day: "2027-01-02", mrr: { services: 1n, amount: "8.33" }, movements: moves("0.00", "10.00") },
        ],
      },
    ],
  });

  it("plots MRR and its movements per day, keeps the exact text, and leaves out plan changes until they move", () => {
    const [cny] = mrrCharts(res);
    expect(cny?.id).toBe("mrr-CNY");
    expect(cny?.series.map((s) => s.label)).toEqual(["MRR", "New", "Churn", "Reactivation"]);
    expect(cny?.series[0]?.values).toEqual([18.33, 8.33]);
    expect(cny?.series[0]?.texts).toEqual(["18.33", "8.33"]);
    expect(cny?.series[2]?.texts).toEqual(["0.00", "10.00"]);
  });
});
