import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";

import { GetPaymentTrendsResponseSchema } from "./gen/billing/payment/payment_admin_pb";
import { duration, moneyCharts, successRateChart, trendRange } from "./trends";

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
