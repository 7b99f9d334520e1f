// What a refund came to, in words an admin can act on. RefundPayment ends
// one of four ways: succeeded; accepted but pending (the gateway completes
// it later — a bank transfer is sent back by hand — and an admin records
// the outcome with ResolveRefund); refused by the gateway (Internal "gateway
// refund failed: <reason>"); or with an unknown outcome (Internal "gateway
// refund failed: the outcome is unknown …": the refund stays pending with
// its amount reserved). No DOM here, so the wording is unit-tested.

import { Code } from "@connectrpc/connect";

import { fromCents, money } from "./format";

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

/** What a refund's confirmation dialog asks, in words: its title, the
 * amount with its currency, where the money goes (the gateway interface by
 * name, or the customer's balance), what stays refundable, and its button. */
export interface RefundConfirmation {
  title: string;
  /** "10.00 CNY" */
  amount: string;
  /** Where the money goes, in a sentence. */
  destination: string;
  /** What is left to refund afterwards, or that nothing is. */
  remainder: string;
  confirm: string;
}

export interface RefundAsk {
  /** The amount to refund and what is left to refund before it, in cents. */
  cents: bigint;
  left: bigint;
  currency: string;
  /** gateway: back through the payment's gateway interface; balance: to the customer's balance. */
  destination: "gateway" | "balance";
  /** The gateway interface's display name (its id when the name is unknown); empty for a balance payment. */
  gateway: string;
  /** Captured money of a failed payment, returned rather than refunded. */
  captured?: boolean;
}

export function refundConfirmation(a: RefundAsk): RefundConfirmation {
  const amount = money(fromCents(a.cents), a.currency);
  const toBalance = a.destination === "balance" || a.gateway === "";
  const full = a.cents >= a.left;
  const verb = a.captured ? (toBalance ? "Credit" : "Return") : "Refund";
  return {
    title: a.captured
      ? toBalance
        ? "Credit to the customer's balance?"
        : "Return through the gateway?"
      : full
        ? "Refund in full?"
        : "Refund part of this payment?",
    amount,
    destination: toBalance
      ? `${amount} goes to the customer's balance here, credited at once; nothing goes back through ${a.gateway ? `the gateway interface “${a.gateway}”` : "a gateway"}.`
      : `${amount} goes back to the payer through the gateway interface “${a.gateway}”.`,
    remainder: full
      ? `Nothing will be left to ${a.captured ? "return" : "refund"}.`
      : `${money(fromCents(a.left - a.cents), a.currency)} will remain ${a.captured ? "to return" : "refundable"}.`,
    confirm: toBalance ? `${verb} ${amount} to the balance` : `${verb} ${amount} through ${a.gateway}`,
  };
}
