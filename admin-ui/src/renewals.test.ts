import { describe, expect, it } from "vitest";

import { attemptText, canSetRenewal, cardChargeRows, chargeOutcomeText, daysLeft, daysLeftText, extendBlocked, isRecurring, planChangeMoney, planTargets, planWhens, services, suspendReasonText } from "./renewals";

describe("what a recurring order allows", () => {
  it("tells recurring orders from one-time ones", () => {
    expect(isRecurring({ billingCycle: "monthly" })).toBe(true);
    expect(isRecurring({ billingCycle: "annual" })).toBe(true);
    expect(isRecurring({ billingCycle: "one_time" })).toBe(false);
    expect(isRecurring({ billingCycle: "" })).toBe(false);
  });

  it("turns renewal off or on until the service has ended", () => {
    for (const status of ["pending", "paid", "provisioning", "active", "suspended"]) {
      expect(canSetRenewal({ billingCycle: "monthly", status })).toBe(true);
    }
    for (const status of ["cancelled", "refunded", "completed", "terminated"]) {
      expect(canSetRenewal({ billingCycle: "monthly", status })).toBe(false);
    }
    expect(canSetRenewal({ billingCycle: "one_time", status: "active" })).toBe(false);
  });

  it("extends a running service whose last period is paid", () => {
    const paid = [{ period: 1, status: "paid", invoiceId: "" }];
    expect(extendBlocked({ status: "active" }, paid)).toBeNull();
    expect(extendBlocked({ status: "suspended" }, paid)).toBeNull();
    expect(extendBlocked({ status: "completed" }, paid)).toContain("running service");
    expect(extendBlocked({ status: "active" }, [])).toContain("no service period");
    const unpaid = [...paid, { period: 2, status: "unpaid", invoiceId: "inv-2" }];
    expect(extendBlocked({ status: "active" }, unpaid)).toBe(
      "Period 2 is invoiced and not paid (invoice inv-2): its invoice must be paid or cancelled before the service can be extended.",
    );
  });

  it("says why an order is suspended", () => {
    expect(suspendReasonText("overdue")).toContain("paying it resumes the service");
    expect(suspendReasonText("admin")).toContain("by an admin");
    expect(suspendReasonText("")).toBe("—");
    expect(suspendReasonText("later")).toBe("later");
  });
});

describe("days left before an unpaid renewal's next step", () => {
  const due = "2026-12-01T10:00:00Z";

  it("counts whole days by the service's clock: the span less the days overdue and the day under way", () => {
    // Suspended 3 days past due, ended 14 days past due: 10 d 23 h left.
    expect(daysLeft({ dueAt: due, nextStepAt: "2026-12-15T10:00:00Z", daysOverdue: 3 })).toBe(10);
    expect(daysLeftText({ dueAt: due, nextStepAt: "2026-12-15T10:00:00Z", daysOverdue: 3 })).toBe("10 days left");
    // Overdue 1 day, suspended 3 days past due: 1 d 23 h left.
    expect(daysLeftText({ dueAt: due, nextStepAt: "2026-12-04T10:00:00Z", daysOverdue: 1 })).toBe("1 day left");
    expect(daysLeftText({ dueAt: due, nextStepAt: "2026-12-04T10:00:00Z", daysOverdue: 2 })).toBe("less than a day left");
  });

  it("holds a span that a change of daylight saving time made an hour off to whole days", () => {
    expect(daysLeft({ dueAt: "2026-10-20T10:00:00+02:00", nextStepAt: "2026-11-03T10:00:00+01:00", daysOverdue: 0 })).toBe(13);
  });

  it("never goes below zero, and has no figure without a next step", () => {
    expect(daysLeft({ dueAt: due, nextStepAt: "2026-12-04T10:00:00Z", daysOverdue: 5 })).toBe(0);
    expect(daysLeft({ dueAt: due, nextStepAt: "", daysOverdue: 1 })).toBeNull();
    expect(daysLeftText({ dueAt: due, nextStepAt: "", daysOverdue: 1 })).toBe("");
    expect(daysLeft({ dueAt: "", nextStepAt: "2026-12-04T10:00:00Z", daysOverdue: 1 })).toBeNull();
  });

  it("counts services", () => {
    expect(services(1n)).toBe("1 service");
    expect(services(0n)).toBe("0 services");
    expect(services(3)).toBe("3 services");
  });
});

describe("plan changes", () => {
  const order = { productId: "p1", currency: "CNY", billingCycle: "monthly", renews: true };
  const product = (id: string, more: Partial<{ enabled: boolean; billingCycle: string; currency: string }> = {}) => ({
    id,
    enabled: true,
    billingCycle: "monthly",
    currency: "CNY",
    ...more,
  });

  it("offers enabled recurring products in the order's currency, not its own", () => {
    const all = [
      product("p1"),
      product("p2"),
      product("p3", { enabled: false }),
      product("p4", { billingCycle: "one_time" }),
      product("p5", { currency: "USD" }),
      product("p6", { billingCycle: "annual" }),
    ];
    expect(planTargets(order, all).map((p) => p.id)).toEqual(["p2", "p6"]);
  });

  it("changes the cycle at the period end only, and only while the order renews", () => {
    expect(planWhens(order, product("p2"))).toEqual(["now", "period_end"]);
    expect(planWhens(order, product("p6", { billingCycle: "annual" }))).toEqual(["period_end"]);
    expect(planWhens({ ...order, renews: false }, product("p2"))).toEqual(["now"]);
    expect(planWhens({ ...order, renews: false }, product("p6", { billingCycle: "annual" }))).toEqual([]);
  });

  it("says what a change bills or credits", () => {
    expect(planChangeMoney({ when: "now", amount: "21.00", credited: "0.00", toPrice: "60.00" })).toEqual(["Billed now (prorated)", "21.00"]);
    expect(planChangeMoney({ when: "now", amount: "-21.00", credited: "21.00", toPrice: "30.00" })).toEqual(["Credited to the balance now", "21.00"]);
    expect(planChangeMoney({ when: "now", amount: "-21.00", credited: "0.00", toPrice: "30.00" })).toEqual(["Credited to the balance now", "0.00"]);
    expect(planChangeMoney({ when: "period_end", amount: "0.00", credited: "0.00", toPrice: "60.00" })).toEqual(["Next renewal bills", "60.00"]);
  });
});

describe("saved-card charges on the Renewals screen", () => {
  const charge = (attempt: number, createdAt: string) => ({ attempt, createdAt, outcome: "declined", code: "card_declined", message: "declined" });

  it("lists every listed invoice's charges once, newest first", () => {
    const a = { order: { id: "o1" }, invoiceId: "i1", cardCharges: [charge(0, "2026-03-01T00:00:00Z"), charge(1, "2026-03-04T00:00:00Z")] };
    const b = { order: { id: "o2" }, invoiceId: "i2", cardCharges: [charge(0, "2026-03-02T00:00:00Z")] };
    const none = { order: { id: "o3" }, invoiceId: "i3", cardCharges: [] };
    const rows = cardChargeRows([[a, none], [b], [a]]);
    expect(rows.map((r) => [r.orderId, r.invoiceId, r.charge.attempt])).toEqual([
      ["o1", "i1", 1],
      ["o2", "i2", 0],
      ["o1", "i1", 0],
    ]);
    expect(cardChargeRows([[none], []])).toEqual([]);
  });

  it("says which attempt and how it ended", () => {
    expect(attemptText(0)).toBe("due day");
    expect(attemptText(2)).toBe("retry 2");
    expect(chargeOutcomeText({ outcome: "", code: "", message: "" })).toBe("awaiting the gateway");
    expect(chargeOutcomeText({ outcome: "succeeded", code: "", message: "" })).toBe("");
    expect(chargeOutcomeText({ outcome: "declined", code: "card_declined", message: "Your card was declined." })).toBe("card_declined: Your card was declined.");
  });
});
