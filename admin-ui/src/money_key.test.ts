import { describe, expect, it } from "vitest";

import { MoneyKey } from "./money_key";

describe("MoneyKey", () => {
  it("sends the same key for the same request from one form, and a new one when the request changes", () => {
    const k = new MoneyKey();
    const a = k.options({ paymentId: "p", amount: "1.00" }).headers["Idempotency-Key"];
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(k.options({ paymentId: "p", amount: "1.00" }).headers["Idempotency-Key"]).toBe(a);
    const b = k.options({ paymentId: "p", amount: "2.00" }).headers["Idempotency-Key"];
    expect(b).not.toBe(a);
    expect(k.options({ paymentId: "p", amount: "1.00" }).headers["Idempotency-Key"]).not.toBe(a);
  });

  it("gives every form its own key, so two equal refunds made on purpose are two", () => {
    const req = { paymentId: "p", amount: "1.00" };
    expect(new MoneyKey().options(req).headers["Idempotency-Key"]).not.toBe(new MoneyKey().options(req).headers["Idempotency-Key"]);
  });
});
