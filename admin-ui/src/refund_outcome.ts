// What a refund came to, in words an admin can act on. RefundPayment ends
// one of four ways: succeeded; accepted but pending (the gateway completes
// it later — a bank transfer is sent back by hand — and an admin records
// the outcome with ResolveRefund); refused by the gateway (Internal "gateway
// refund failed: <reason>"); or with an unknown outcome (Internal "gateway
// refund failed: the outcome is unknown …": the refund stays pending with
// its amount reserved). No DOM here, so the wording is unit-tested.

import { Code } from "@connectrpc/connect";

import { money } from "./format";

/** ok: the money went back; pending: it waits for the gateway or an admin;
 * error: nothing was refunded, or nobody knows yet. */
export type Tone = "ok" | "pending" | "error";

export interface RefundNotice {
  tone: Tone;
  title: string;
  lines: string[];
}

/** The fields of a Refund (billing.payment.Refund) the wording needs. */
export interface RefundLike {
  amount: string;
  status: string;
  gatewayRefundId: string;
  /** What the gateway or the service said, whatever the outcome. */
  message: string;
  /** Why it failed; empty unless status is failed. */
  error: string;
  /** Where the money went: gateway or balance ("" from an older server: gateway). */
  destination?: string;
}

/** Where a pending refund's outcome is recorded, as the refunds list calls it. */
export const recordHint = "record it with “Record outcome” in the refunds below";

/** The refund a successful RefundPayment answered: succeeded, or pending
 * (its amount reserved, not yet in the payment's refunded amount). */
export function refundAnswered(r: RefundLike, currency: string): RefundNotice {
  const amount = money(r.amount, currency);
  switch (r.status) {
    case "succeeded":
      if (r.destination === "balance") {
        return {
          tone: "ok",
          title: `Credited ${amount} to the customer's balance`,
          lines: ["The balance grew at once, with a refund entry in its ledger; nothing went back through the gateway."],
        };
      }
      return {
        tone: "ok",
        title: `Refunded ${amount}`,
        lines: [
          r.gatewayRefundId ? `The gateway completed it (its refund id: ${r.gatewayRefundId}).` : "The gateway completed it.",
          r.message ? `The gateway says: ${r.message}` : "",
        ].filter((l) => l !== ""),
      };
    case "pending":
      return {
        tone: "pending",
        title: `Refund of ${amount} pending: the gateway completes it later`,
        lines: [
          r.message ? `The gateway says: ${r.message}` : "",
          "Nothing is refunded yet: the amount stays reserved, and the payment's refunded amount grows once the refund is recorded as succeeded.",
          `When the money has gone back (a bank transfer is sent back by hand), ${recordHint}.`,
        ].filter((l) => l !== ""),
      };
    default:
      return { tone: "error", title: `Refund of ${amount} failed`, lines: r.error || r.message ? [r.error || r.message] : [] };
  }
}

const failedPrefix = "gateway refund failed: ";
const unknownPrefix = "gateway refund failed: the outcome is unknown";

/** The words for an error RefundPayment answered after it made a refund
 * row (the gateway refused, the outcome is unknown, the gateway could not
 * be reached), so the page is reloaded to list it; null for any other error
 * (bad amount, nothing left, …), which the form shows as it came. */
export function refundRefused(code: Code, message: string): RefundNotice | null {
  const msg = message.trim();
  if (code === Code.Internal && (msg.startsWith(unknownPrefix) || /stays pending/.test(msg))) {
    return {
      tone: "error",
      title: "Refund outcome unknown: it stays pending",
      lines: [
        msg,
        `Its amount stays reserved and it is never sent again. Check at the gateway whether the money went back, then ${recordHint}.`,
      ],
    };
  }
  if (code === Code.Internal && msg.startsWith(failedPrefix)) {
    const reason = msg.slice(failedPrefix.length);
    return {
      tone: "error",
      title: "The gateway refused the refund",
      lines: [reason.charAt(0).toUpperCase() + reason.slice(1), "Nothing was refunded; the refund is listed as failed."],
    };
  }
  if (code === Code.Unavailable) {
    return {
      tone: "error",
      title: "The gateway cannot be reached",
      lines: [msg, "Nothing was sent; try again later."].filter((l) => l !== ""),
    };
  }
  return null;
}

/** What ResolveRefund recorded, for the notice after the page reloads. */
export function refundResolved(r: RefundLike, payment: { status: string; refundedAmount: string }, currency: string): RefundNotice {
  const amount = money(r.amount, currency);
  if (r.status === "succeeded") {
    return {
      tone: "ok",
      title: `Refund of ${amount} recorded as succeeded`,
      lines: [`The payment is ${payment.status}, with ${money(payment.refundedAmount || "0.00", currency)} refunded.`],
    };
  }
  return {
    tone: "ok",
    title: `Refund of ${amount} recorded as failed`,
    lines: [`Its amount is released and can be refunded again. The payment is ${payment.status}.`],
  };
}

/** What an empty list of refunds across payments says: nothing waiting
 * (pending), none in another status, none at all; or, past the last page,
 * just that. */
export function refundsNone(status: string, page: number): string {
  if (page > 1) {
    return "No refunds on this page.";
  }
  switch (status) {
    case "":
      return "No refunds yet.";
    case "pending":
      return "No refund is waiting for its gateway or an admin.";
    default:
      return `No ${status} refunds.`;
  }
}
