import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";

import { refundAnswered, refundConfirmation, refundRefused, refundResolved, refundsNone } from "./refund_outcome";

const refund = (status: string, extra: Partial<{ gatewayRefundId: string; message: string; error: string }> = {}) => ({
  amount: "99.00",
  status,
  gatewayRefundId: "",
  message: "",
  error: "",
  ...extra,
});

describe("what a refund came to", () => {
  it("says a succeeded refund went back", () => {
    const n = refundAnswered(refund("succeeded", { gatewayRefundId: "R-7" }), "CNY");
    expect(n.tone).toBe("ok");
    expect(n.title).toBe("Refunded 99.00 CNY");
    expect(n.lines.join(" ")).toContain("R-7");
  });

  it("says a refund to the balance was credited there, not sent through the gateway", () => {
    const n = refundAnswered({ ...refund("succeeded"), destination: "balance" }, "CNY");
    expect(n.tone).toBe("ok");
    expect(n.title).toBe("Credited 99.00 CNY to the customer's balance");
    expect(n.lines.join(" ")).not.toContain("The gateway completed it");
  });

  it("shows a succeeded refund's gateway text as what the gateway says, not as an error", () => {
    const n = refundAnswered(refund("succeeded", { message: "退款成功" }), "CNY");
    expect(n.tone).toBe("ok");
    expect(n.lines).toContain("The gateway says: 退款成功");
  });

  it("says why a failed refund failed", () => {
    const n = refundAnswered(refund("failed", { message: "insufficient funds", error: "insufficient funds" }), "CNY");
    expect(n.tone).toBe("error");
    expect(n.lines).toEqual(["insufficient funds"]);
  });

  it("says a pending refund is not refunded yet and how to record it", () => {
    const n = refundAnswered(refund("pending", { message: "refund manually: transfer 99.00 CNY back to the payer (reference BT-1), then record it" }), "CNY");
    expect(n.tone).toBe("pending");
    expect(n.title).toBe("Refund of 99.00 CNY pending: the gateway completes it later");
    const text = n.lines.join(" ");
    expect(text).toContain("The gateway says: refund manually: transfer 99.00 CNY back");
    expect(text).toContain("sent back by hand");
    expect(text).toContain("Record outcome");
    expect(text).toContain("Nothing is refunded yet");
  });

  it("leaves out a gateway message it was not given", () => {
    const n = refundAnswered(refund("pending"), "USD");
    expect(n.lines.some((l) => l.startsWith("The gateway says"))).toBe(false);
  });
});

describe("a refund the service answered with an error", () => {
  it("tells a refusal by the gateway, with its reason", () => {
    const n = refundRefused(Code.Internal, "gateway refund failed: insufficient merchant balance");
    expect(n?.title).toBe("The gateway refused the refund");
    expect(n?.lines[0]).toBe("Insufficient merchant balance");
    expect(n?.lines.join(" ")).toContain("Nothing was refunded");
  });

  it("tells an unknown outcome apart: pending, reserved, to be recorded", () => {
    const msg =
      "gateway refund failed: the outcome is unknown (outcome unknown: http_error: 502); refund 3e4f of 20.00 CNY stays pending and keeps its amount reserved: check it at the gateway, then record the outcome with ResolveRefund";
    const n = refundRefused(Code.Internal, msg);
    expect(n?.title).toBe("Refund outcome unknown: it stays pending");
    expect(n?.lines[0]).toBe(msg);
    expect(n?.lines[1]).toContain("never sent again");
    expect(n?.lines[1]).toContain("Record outcome");
  });

  it("tells an answer that could not be recorded like an unknown outcome", () => {
    const n = refundRefused(Code.Internal, "refund 3e4f: the gateway's answer (succeeded) could not be recorded; the refund stays pending: check it, then record the outcome with ResolveRefund");
    expect(n?.title).toBe("Refund outcome unknown: it stays pending");
  });

  it("tells an unreachable gateway", () => {
    const n = refundRefused(Code.Unavailable, "gateway pay.example.com unavailable");
    expect(n?.title).toBe("The gateway cannot be reached");
    expect(n?.lines).toEqual(["gateway pay.example.com unavailable", "Nothing was sent; try again later."]);
  });

  it.each([
    [Code.InvalidArgument, "refund amount exceeds what is left"],
    [Code.FailedPrecondition, "whatever"],
    [Code.Internal, "internal error"],
  ])("leaves other errors to the form (%s)", (code, msg) => {
    expect(refundRefused(code, msg)).toBeNull();
  });
});

describe("an outcome an admin recorded", () => {
  it("says what became of the payment", () => {
    const ok = refundResolved(refund("succeeded"), { status: "refunded", refundedAmount: "99.00" }, "CNY");
    expect(ok.title).toBe("Refund of 99.00 CNY recorded as succeeded");
    expect(ok.lines[0]).toBe("The payment is refunded, with 99.00 CNY refunded.");
    const failed = refundResolved(refund("failed"), { status: "success", refundedAmount: "" }, "CNY");
    expect(failed.title).toBe("Refund of 99.00 CNY recorded as failed");
    expect(failed.lines[0]).toContain("can be refunded again");
  });
});

describe("an empty list of refunds", () => {
  it("says nothing waits when no refund is pending", () => {
    expect(refundsNone("pending", 1)).toBe("No refund is waiting for its gateway or an admin.");
  });

  it("names the status, or says there are none at all", () => {
    expect(refundsNone("failed", 1)).toBe("No failed refunds.");
    expect(refundsNone("", 1)).toBe("No refunds yet.");
  });

  it("says a page past the last is empty, not that there are none", () => {
    expect(refundsNone("pending", 3)).toBe("No refunds on this page.");
  });
});

describe("what a refund's confirmation asks", () => {
  it("names the gateway interface the money goes back through, and the amount with its currency", () => {
    const c = refundConfirmation({ cents: 1000n, left: 9900n, currency: "CNY", destination: "gateway", gateway: "Bank transfer (e2e)" });
    expect(c.title).toBe("Refund part of this payment?");
    expect(c.amount).toBe("10.00 CNY");
    expect(c.destination).toBe("10.00 CNY goes back to the payer through the gateway interface “Bank transfer (e2e)”.");
    expect(c.remainder).toBe("89.00 CNY will remain refundable.");
    expect(c.confirm).toBe("Refund 10.00 CNY through Bank transfer (e2e)");
  });

  it("says the customer's balance when the money goes there, whether chosen or because the payment was from the balance", () => {
    const chosen = refundConfirmation({ cents: 9900n, left: 9900n, currency: "EUR", destination: "balance", gateway: "Stripe" });
    expect(chosen.title).toBe("Refund in full?");
    expect(chosen.destination).toContain("99.00 EUR goes to the customer's balance");
    expect(chosen.destination).toContain("nothing goes back through the gateway interface “Stripe”");
    expect(chosen.remainder).toBe("Nothing will be left to refund.");
    expect(chosen.confirm).toBe("Refund 99.00 EUR to the balance");
    const balancePaid = refundConfirmation({ cents: 500n, left: 9900n, currency: "CNY", destination: "gateway", gateway: "" });
    expect(balancePaid.destination).toBe("5.00 CNY goes to the customer's balance here, credited at once; nothing goes back through a gateway.");
  });

  it("asks to return or credit captured money", () => {
    const back = refundConfirmation({ cents: 9900n, left: 9900n, currency: "CNY", destination: "gateway", gateway: "Bank transfer", captured: true });
    expect(back.title).toBe("Return through the gateway?");
    expect(back.confirm).toBe("Return 99.00 CNY through Bank transfer");
    expect(back.remainder).toBe("Nothing will be left to return.");
    const credit = refundConfirmation({ cents: 9900n, left: 9900n, currency: "CNY", destination: "balance", gateway: "Bank transfer", captured: true });
    expect(credit.title).toBe("Credit to the customer's balance?");
    expect(credit.confirm).toBe("Credit 99.00 CNY to the balance");
  });
});
