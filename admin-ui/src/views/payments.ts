import { ConnectError } from "@connectrpc/connect";

import { gateways, orders, paymentAdmin, payments } from "../api";
import { MoneyKey } from "../money_key";
import { h, replace, uid, type Child } from "../dom";
import { exportForm } from "../export_form";
import { auditColumns, auditLink } from "./audit";
import { dateTime, fromCents, money, refundable, shortId, toCents, transferReference } from "../format";
import type { PaymentRecord, Refund, RefundPaymentResponse } from "../gen/billing/payment/payment_pb";
import type { ResolveRefundResponse } from "../gen/billing/payment/payment_admin_pb";
import { refundAnswered, refundConfirmation, refundRefused, refundResolved, type RefundNotice } from "../refund_outcome";
import type { RouteContext } from "../router";
import { checkFilter, choice, listScreen, textFilter } from "../list";
import { ListPaymentsRequestAllowed } from "../gen/billing/payment/payment_allowed";
import {
  alertSlot,
  announce,
  badge,
  busy,
  confirmDialog,
  empty,
  facts,
  field,
  idLink,
  link,
  loadBlock,
  pageTitle,
  requestedBy,
  table,
  type Column,
} from "../ui";

let names: { at: number; map: Promise<Map<string, string>> } | null = null;

/** Display names of the gateway interfaces, for tables of payments; cached for
 * a minute. Without the gateway API the tables show ids. */
export function interfaceNames(): Promise<Map<string, string>> {
  if (!names || Date.now() - names.at > 60_000) {
    const map = gateways
      .listGatewayInterfaces({ pagination: { page: 1, pageSize: 100 } })
      .then((res) => new Map(res.gatewayInterfaces.map((g) => [g.id, g.displayName] as const)))
      .catch(() => new Map<string, string>());
    names = { at: Date.now(), map };
  }
  return names.map;
}

/** Forgets the cached interface names (after one is created or renamed). */
export function forgetInterfaceNames(): void {
  names = null;
}

export function paymentColumns(ifaces: Map<string, string>): Column<PaymentRecord>[] {
  return [
    { header: "Payment", cell: (p) => idLink(`payments/${p.id}`, p.id) },
    { header: "Status", cell: (p) => (toReturn(p) > 0n ? [badge(p.status), " ", h("span", { class: "badge badge-warn" }, "money to return")] : badge(p.status)) },
    { header: "Amount", numeric: true, cell: (p) => money(p.amount, p.currency) },
    { header: "Refunded", numeric: true, cell: (p) => (toCents(p.refundedAmount || "0") ? money(p.refundedAmount, p.currency) : "—") },
    { header: "Order", cell: (p) => (p.orderId ? idLink(`orders/${p.orderId}`, p.orderId) : "—") },
    {
      header: "Paid through",
      cell: (p) => {
        if (!p.gatewayInterfaceId) return "balance";
        const name = ifaces.get(p.gatewayInterfaceId);
        return name ? link(`gateways/${p.gatewayInterfaceId}`, name, { title: p.gatewayInterfaceId }) : idLink(`gateways/${p.gatewayInterfaceId}`, p.gatewayInterfaceId);
      },
    },
    { header: "Created", cell: (p) => dateTime(p.createdAt) },
    { header: "Paid", cell: (p) => dateTime(p.paidAt) },
  ];
}

/** The captured money of a failed payment not yet returned, in cents: the
 * gateway took it after the payment could no longer apply. */
export function toReturn(p: PaymentRecord): bigint {
  return refundable(p.capturedAmount || "0", p.refundedAmount);
}

/** The name of a payment's gateway interface (its id until the name is
 * known); "" for a balance payment. */
async function gatewayName(p: PaymentRecord): Promise<string> {
  if (!p.gatewayInterfaceId) return "";
  return (await interfaceNames()).get(p.gatewayInterfaceId) ?? p.gatewayInterfaceId;
}

/** Asks the admin to confirm sending cents of a payment's money to
 * destination, repeating the amount with its currency and where it goes
 * (the gateway interface by name, or the customer's balance), with the
 * reason when there is one. left is what can still go back before it. */
export async function confirmRefund(
  p: PaymentRecord,
  cents: bigint,
  left: bigint,
  destination: "gateway" | "balance",
  why = "",
  captured = false,
): Promise<boolean> {
  const c = refundConfirmation({ cents, left, currency: p.currency, destination, gateway: await gatewayName(p), captured });
  return confirmDialog({
    title: c.title,
    body: [
      h("p", null, `${captured ? "Payment" : "Refund of payment"} `, h("code", { title: p.id }, p.id.slice(0, 8)), ": ", h("strong", { "data-testid": "confirm-amount" }, c.amount), "."),
      h("p", { "data-testid": "confirm-destination" }, c.destination),
      h("p", null, c.remainder),
      why ? h("p", null, `Reason: ${why}`) : null,
    ],
    confirm: c.confirm,
    danger: !captured,
  });
}

/** Asks the admin to confirm returning all of a failed payment's captured
 * cents to destination. */
export function confirmReturn(p: PaymentRecord, cents: bigint, destination: "gateway" | "balance", why = ""): Promise<boolean> {
  return confirmRefund(p, cents, cents, destination, why, true);
}

/** Payments with filters (status, order, gateway interface, money to return)
 * and paging. */
export function paymentsView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  // A select of the gateway interfaces once their names are known; a UUID
  // field until then, or when the server has no gateway API.
  let iface: HTMLInputElement | HTMLSelectElement = textFilter(query, "interface", { placeholder: "gateway interface UUID", size: 38 });
  void interfaceNames().then((names) => {
    if (names.size === 0 || signal.aborted) return;
    const sel = choice(query, "interface", [...names.keys()], (id) => names.get(id)!);
    sel.id = iface.id;
    iface.replaceWith(sel);
    iface = sel;
  });
  return listScreen(ctx, {
    title: "Payments",
    what: "payments",
    filters: {
      label: "Filter payments",
      fields: [
        field("Status", choice(query, "status", ListPaymentsRequestAllowed.status)),
        field("Order", textFilter(query, "order", { placeholder: "order UUID", size: 38 })),
        field(
          "Transfer reference",
          textFilter(query, "reference", { placeholder: "44B14F89", size: 10, maxlength: 8, pattern: "[0-9A-Fa-f]{8}", title: "8 hexadecimal characters" }),
          "What a bank-transfer customer quotes: the first 8 characters of the payment id.",
        ),
        field("Gateway interface", iface),
        field("Money to return", checkFilter(query, "return"), "Only payments whose captured money has not gone back yet."),
      ],
    },
    // The download takes the filters the list shows (the URL's), not the
    // form's unapplied edits.
    aboveList: exportForm("payments", {
      status: query.get("status") || undefined,
      order_id: query.get("order") || undefined,
      gateway_interface_id: query.get("interface") || undefined,
      to_return: query.get("return") === "1" ? "true" : undefined,
    }),
    load: async (q) => {
      const res = await payments.listPayments(
        { pagination: q.pagination, status: q.get("status"), orderId: q.get("order"), reference: q.get("reference"), gatewayInterfaceId: q.get("interface"), toReturn: q.get("return") === "1" },
        { signal },
      );
      return { rows: res.payments, meta: res.meta };
    },
    caption: "Payments",
    columns: async () => paymentColumns(await interfaceNames()),
    empty: (q) => (q.filtered ? "No payments match these filters." : "No payments yet."),
  }).element;
}

/** Loads the payment again (after an action), with what the action came to
 * shown above it until the next action. */
type Reload = (notice?: RefundNotice) => void;

/** One payment: its facts, its order, refunds and audit trail where the
 * server exposes them, and the admin actions its status allows. */
export function paymentDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const notice = h("div", { class: "notice-slot" });
  const body = h("div");
  const load: Reload = (n) => {
    replace(notice, n ? noticeBox(n) : null);
    replace(
      body,
      loadBlock("payment", async () => {
        const res = await payments.getPayment({ id }, { signal });
        return paymentBody(res.payment!, signal, load);
      }),
    );
    // Keyboard and screen reader users land on what happened.
    (notice.firstElementChild as HTMLElement | null)?.focus();
  };
  load();
  return h("section", null, pageTitle("Payment", h("p", { class: "subtitle" }, h("code", null, id))), notice, body);
}

/** What a refund (or a recorded outcome) came to: a status for success and
 * pending, an alert for errors. */
function noticeBox(n: RefundNotice): HTMLElement {
  return h(
    "div",
    { class: `outcome outcome-${n.tone}`, role: n.tone === "error" ? "alert" : "status", tabindex: -1, "data-testid": "refund-outcome" },
    h("strong", null, n.title),
    n.lines.map((line) => h("p", null, line)),
  );
}

function paymentBody(p: PaymentRecord, signal: AbortSignal, reload: Reload): HTMLElement {
  // One ListRefunds for the refund form (what pending refunds reserve), the
  // refunds list and the audit trail (each refund's entries).
  const refunds = paymentAdmin.listRefunds({ paymentId: p.id }, { signal }).then((res) => res.refunds);
  return h(
    "div",
    { class: "detail" },
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-facts" },
      h("h2", { id: "payment-facts" }, "Details"),
      facts([
        ["Status", h("span", { "data-testid": "payment-status" }, badge(p.status))],
        ["Amount", money(p.amount, p.currency)],
        ["Refunded", h("span", { "data-testid": "refunded-amount" }, money(p.refundedAmount || "0.00", p.currency))],
        ["Order", p.orderId ? link(`orders/${p.orderId}`, h("code", null, p.orderId)) : ""],
        ["Invoice", p.invoiceId ? link(`invoices/${p.invoiceId}`, h("code", null, p.invoiceId)) : ""],
        ["Gateway interface", p.gatewayInterfaceId ? interfaceLink(p.gatewayInterfaceId) : "customer balance"],
        ["Transfer reference", h("code", { "data-testid": "transfer-reference", title: "What a bank-transfer customer quotes: the first 8 characters of the payment id" }, transferReference(p.id))],
        ["Gateway payment id", p.gatewayPaymentId],
        ["Gateway transaction", p.gatewayTxId],
        ["Paid", dateTime(p.paidAt)],
        ["Failed", p.failedAt ? `${dateTime(p.failedAt)}: ${p.failureReason}` : ""],
        [
          "Captured",
          toCents(p.capturedAmount || "0")
            ? h(
                "span",
                { "data-testid": "captured-amount" },
                `${money(p.capturedAmount, p.currency)} on ${dateTime(p.capturedAt)}; ${money(fromCents(toReturn(p)), p.currency)} still to return`,
              )
            : "",
        ],
        ["Created", dateTime(p.createdAt)],
        ["Updated", dateTime(p.updatedAt)],
      ]),
    ),
    actions(p, refunds, reload),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-order" },
      h("h2", { id: "payment-order" }, "Order"),
      p.orderId
        ? loadBlock("order", async () => {
            const { order } = await orders.getOrder({ id: p.orderId }, { signal });
            return facts([
              ["Order", link(`orders/${order!.id}`, h("code", null, order!.id))],
              ["Status", badge(order!.status)],
              ["Total", money(order!.totalAmount, order!.currency)],
              ["Customer", link(`customers/${order!.customerId}`, h("code", null, order!.customerId))],
              ["Description", order!.description],
              ["Created", dateTime(order!.createdAt)],
            ]);
          })
        : empty("This payment is for an invoice alone."),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-refunds" },
      h("h2", { id: "payment-refunds" }, "Refunds"),
      loadBlock("refunds", async () => {
        const rs = await refunds;
        return rs.length ? table("Refunds of this payment", refundColumns(p, reload), rs) : empty("No refunds of this payment.");
      }),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-audit" },
      h("h2", { id: "payment-audit" }, "Audit trail"),
      h("p", { class: "card-links" }, auditLink("payment", p.id, "This payment in the audit log")),
      loadBlock("audit trail", async () => auditTrail(p, await refunds.catch(() => []), signal)),
    ),
  );
}

function refundColumns(p: PaymentRecord, reload: Reload): Column<Refund>[] {
  return [
    { header: "Refund", cell: (r) => h("code", { title: r.id }, shortId(r.id)) },
    { header: "Status", cell: (r) => badge(r.status) },
    { header: "Amount", numeric: true, cell: (r) => money(r.amount, p.currency) },
    { header: "To", cell: (r) => (r.destination === "balance" ? "balance" : "gateway") },
    { header: "Reason", cell: (r) => r.reason || "—" },
    { header: "Gateway refund id", cell: (r) => (r.gatewayRefundId ? h("code", null, r.gatewayRefundId) : "—") },
    // What the gateway said: its success text, what to send back or why
    // the outcome is unknown for a pending refund, why a failed one failed.
    { header: "Message", cell: (r) => r.message || r.error || "—" },
    { header: "Requested by", cell: (r) => requestedBy(r) },
    { header: "Created", cell: (r) => dateTime(r.createdAt) },
    { header: "Updated", cell: (r) => dateTime(r.updatedAt) },
    {
      header: "Actions",
      cell: (r) =>
        r.status === "pending"
          ? h(
              "button",
              { type: "button", "aria-label": `Record outcome of refund ${shortId(r.id)}`, onclick: () => recordOutcomeDialog(r, p, reload) },
              "Record outcome…",
            )
          : "—",
    },
  ];
}

/** A modal form recording what an admin found at the gateway (or the bank)
 * for a pending refund: succeeded or failed, the reference, a required
 * note; confirmed, then sent with PaymentAdminService.ResolveRefund. */
function recordOutcomeDialog(r: Refund, p: PaymentRecord, reload: Reload): void {
  const amount = money(r.amount, p.currency);
  const titleId = uid("dlg");
  const back = document.activeElement as HTMLElement | null;
  const radio = (value: string) => h("input", { type: "radio", name: "outcome", value });
  const succeeded = radio("succeeded");
  const failed = radio("failed");
  const reference = h("input", { name: "reference", autocomplete: "off", spellcheck: "false", maxlength: 200, size: 32, value: r.gatewayRefundId });
  const note = h("textarea", { name: "note", maxlength: 500, rows: 3, "aria-required": "true" });
  const errors = alertSlot();
  const resolveKey = new MoneyKey();
  const cancel = h("button", { type: "button" }, "Cancel");
  const submit = h("button", { type: "submit", class: "primary" }, "Record outcome…");
  const form = h(
    "form",
    { "aria-labelledby": titleId, novalidate: true },
    h(
      "fieldset",
      { class: "choices" },
      h("legend", null, "What happened at the gateway"),
      h("label", { class: "choice" }, succeeded, " Succeeded: the money went back to the payer"),
      h("label", { class: "choice" }, failed, " Failed: the money did not go back, release its amount"),
    ),
    field("Gateway or bank reference", reference, "Optional: the refund's id at the gateway, or the reference of the transfer sent back."),
    field("Note", note, "Required: what you checked, e.g. “transfer sent from the operating account”. Kept in the audit log."),
    errors,
    h("div", { class: "actions" }, cancel, submit),
  );
  const dlg = h(
    "dialog",
    { class: "confirm form-dialog", "aria-labelledby": titleId },
    h("h2", { id: titleId }, "Record the outcome of a refund"),
    h("p", null, "Refund ", h("code", { title: r.id }, shortId(r.id)), ` of ${amount}, requested ${dateTime(r.createdAt)}.`),
    r.message ? h("p", { class: "hint" }, `Its last message: ${r.message}`) : null,
    form,
  );
  // After a refusal (another admin recorded it first, say) the page shows
  // the refund as it is once the dialog closes.
  let stale = false;
  let done = false;
  dlg.addEventListener("close", () => {
    dlg.remove();
    if (done) return;
    back?.focus?.();
    if (stale) reload();
  });
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    replace(errors);
    const outcome = succeeded.checked ? "succeeded" : failed.checked ? "failed" : "";
    if (!outcome) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Choose what happened at the gateway: succeeded or failed."));
      succeeded.focus();
      return;
    }
    if (!note.value.trim()) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter a note: what you checked at the gateway or the bank."));
      note.focus();
      return;
    }
    const yes = await confirmDialog({
      title: outcome === "succeeded" ? "Record the refund as succeeded?" : "Record the refund as failed?",
      body: h(
        "p",
        null,
        outcome === "succeeded"
          ? `${amount} counts as refunded; the payment becomes refunded, and its order too, once its refunds reach its amount.`
          : `The refund fails and its ${amount} is released, so it can be refunded again.`,
        " An outcome is recorded once and cannot be changed.",
      ),
      confirm: outcome === "succeeded" ? "Record as succeeded" : "Record as failed",
      danger: true,
    });
    if (!yes) return;
    let res: ResolveRefundResponse | undefined;
    const ok = await busy(submit, errors, async () => {
      const req = { refundId: r.id, outcome, gatewayRefundId: reference.value.trim(), note: note.value.trim() };
      res = await paymentAdmin.resolveRefund(req, resolveKey.options(req));
    });
    if (!ok || !res) {
      stale = true;
      return;
    }
    done = true;
    dlg.close();
    const n = refundResolved(res.refund ?? r, res.payment ?? p, p.currency);
    announce(`${n.title}.`);
    reload(n);
  });
  document.body.appendChild(dlg);
  dlg.showModal();
  succeeded.focus();
}

/** How many entries of each entity the trail shows (the newest). */
const auditPageSize = 50;

/** The audit entries of the payment, its order and its refunds (who asked
 * for each, what the gateway answered, what an admin recorded), merged
 * newest first. */
async function auditTrail(p: PaymentRecord, refunds: Refund[], signal: AbortSignal): Promise<Child> {
  const entities: [string, string][] = [["payment", p.id]];
  if (p.orderId) entities.push(["order", p.orderId]);
  for (const r of refunds) entities.push(["refund", r.id]);
  const pages = await Promise.all(
    entities.map(([entityType, entityId]) =>
      paymentAdmin.listAuditEntries({ entityType, entityId, pagination: { page: 1, pageSize: auditPageSize } }, { signal }),
    ),
  );
  const entries = pages.flatMap((res) => res.entries);
  if (entries.length === 0) {
    return empty("No audit entries for this payment, its order or its refunds.");
  }
  // RFC 3339 in UTC sorts as text; the id orders rows of one instant.
  entries.sort((a, b) => (a.createdAt === b.createdAt ? Number(BigInt(b.id) - BigInt(a.id)) : a.createdAt < b.createdAt ? 1 : -1));
  const total = pages.reduce((n, res) => n + Number(res.meta?.total ?? 0n), 0);
  return [
    table("Audit trail of this payment, its order and its refunds", auditColumns, entries),
    total > entries.length ? h("p", { class: "subtitle" }, `Showing the newest ${entries.length} of ${total} entries.`) : null,
  ];
}

/** A link to the interface, showing its name once known. */
function interfaceLink(id: string): HTMLElement {
  const a = link(`gateways/${id}`, h("code", null, id));
  void interfaceNames().then((names) => {
    const name = names.get(id);
    if (name) {
      replace(a, name);
      a.title = id;
    }
  });
  return a;
}

function actions(p: PaymentRecord, refunds: Promise<Refund[]>, reload: Reload): HTMLElement | null {
  const blocks: HTMLElement[] = [];
  if (p.status === "success" || toReturn(p) > 0n) {
    blocks.push(loadBlock("refund form", () => refundForm(p, refunds, reload)));
  }
  const late = p.status === "failed" && !toCents(p.capturedAmount || "0");
  if ((p.status === "pending" || late) && p.gatewayInterfaceId) {
    // Only a bank-transfer payment is confirmed by hand; the interface says
    // which plugin it goes through. A transfer that arrives after its
    // payment failed is recorded as money to return.
    blocks.push(
      loadBlock("gateway interface", async () => {
        const { gatewayInterface } = await gateways.getGatewayInterface({ id: p.gatewayInterfaceId });
        return gatewayInterface?.pluginName === "bank_transfer" ? confirmTransferForm(p, reload) : null;
      }),
    );
  }
  if (p.status === "pending" && p.gatewayInterfaceId) {
    blocks.push(syncButton(p, reload));
  }
  if (blocks.length === 0) {
    return null;
  }
  return h("section", { class: "card", "aria-labelledby": "payment-actions" }, h("h2", { id: "payment-actions" }, "Actions"), blocks);
}

/** The refund form: an amount (empty: all that is left), where the money
 * goes (a gateway payment's: back through its gateway, or to the customer's
 * balance), an optional reason, a confirmation; afterwards the page says
 * what the refund came to. What pending refunds reserve cannot be refunded
 * again. For captured money (a failed payment whose gateway took the money
 * after all) it is the "Return captured money" form, with a one-step
 * "Credit to balance". */
async function refundForm(p: PaymentRecord, refunds: Promise<Refund[]>, reload: Reload): Promise<HTMLElement> {
  // Without the list the service still refuses too much; the form just
  // offers it.
  const pending = (await refunds.catch(() => [] as Refund[])).filter((r) => r.status === "pending");
  const reserved = pending.reduce((n, r) => n + (toCents(r.amount) ?? 0n), 0n);
  const captured = p.status === "failed";
  const title = captured ? "Return captured money" : "Refund";
  const unrefunded = captured ? toReturn(p) : refundable(p.amount, p.refundedAmount);
  const left = unrefunded > reserved ? unrefunded - reserved : 0n;
  const reservedText = `${money(fromCents(reserved), p.currency)} ${pending.length === 1 ? "is" : "are"} reserved by ${pending.length === 1 ? "a pending refund" : `${pending.length} pending refunds`}`;
  if (left === 0n) {
    return h(
      "div",
      { class: "action-form", role: "group", "aria-label": title },
      h("h3", null, title),
      h("p", null, `Nothing left to refund: ${reservedText}. Record what became of ${pending.length === 1 ? "it" : "them"} in the refunds below.`),
    );
  }
  const amount = h("input", { name: "amount", inputmode: "decimal", autocomplete: "off", placeholder: fromCents(left), size: 12 });
  const reason = h("input", { name: "reason", autocomplete: "off", maxlength: 500, size: 40 });
  // A balance payment always goes back to the balance.
  const destination = p.gatewayInterfaceId
    ? h(
        "select",
        { name: "destination" },
        h("option", { value: "gateway" }, "Back through the gateway"),
        h("option", { value: "balance" }, "To the customer's balance"),
      )
    : null;
  const submit = h("button", { type: "submit", class: "danger" }, captured ? "Return…" : "Refund…");
  const errors = alertSlot();
  const refundKey = new MoneyKey();
  const toBalance = captured
    ? h("button", { type: "button", class: "primary", "data-testid": "credit-to-balance" }, `Credit ${money(fromCents(left), p.currency)} to balance…`)
    : null;
  const form = h(
    "form",
    { class: "action-form", "aria-label": title },
    h("h3", null, title),
    captured
      ? h(
          "p",
          null,
          `The gateway took ${money(p.capturedAmount, p.currency)} after this payment could no longer apply (${p.failureReason || "it had failed"}). ` +
            "Send it back through the gateway, or credit it to the customer's balance in one step.",
        )
      : null,
    toBalance,
    field(
      "Amount",
      amount,
      `Leave empty to refund everything not yet refunded (${money(fromCents(left), p.currency)}).${reserved > 0n ? ` ${reservedText}.` : ""}`,
    ),
    destination ? field("Send to", destination, "Where the money goes: the payer's account at the gateway, or the customer's balance here (at once).") : null,
    field("Reason", reason, "Optional: why the money goes back; kept on the refund and in the audit log."),
    errors,
    submit,
  );
  // send refunds cents (all that is left when whole) to where, after the
  // admin confirmed, and reloads the page with what it came to.
  const send = async (button: HTMLButtonElement, cents: bigint, whole: boolean, where: string | undefined, why: string) => {
    let answer: RefundPaymentResponse | undefined;
    // An error that comes after the refund row was made (the gateway
    // refused, or its answer was lost) reloads the page, which lists it.
    let refused = null as RefundNotice | null;
    const ok = await busy(button, errors, async () => {
      try {
        // An empty amount asks the service to refund the whole remainder.
        const req = { paymentId: p.id, amount: whole ? "" : fromCents(cents), reason: why, destination: where };
        answer = await payments.refundPayment(req, refundKey.options(req));
      } catch (err) {
        const ce = ConnectError.from(err);
        refused = refundRefused(ce.code, ce.rawMessage);
        throw err;
      }
    });
    const n = ok
      ? answer?.refund
        ? refundAnswered(answer.refund, p.currency)
        : { tone: "ok" as const, title: `Refunded ${money(fromCents(cents), p.currency)}`, lines: [] }
      : refused;
    if (n) {
      announce(`${n.title}.`);
      reload(n);
    }
  };
  toBalance?.addEventListener("click", async () => {
    const why = reason.value.trim();
    if (await confirmReturn(p, left, "balance", why)) await send(toBalance, left, true, "balance", why);
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const raw = amount.value.trim();
    let cents = left;
    if (raw !== "") {
      const c = toCents(raw);
      if (c === null || c <= 0n) {
        replace(errors, h("div", { class: "error", role: "alert" }, "Enter an amount such as 10 or 10.50, or leave it empty for a full refund."));
        amount.focus();
        return;
      }
      if (c > left) {
        replace(errors, h("div", { class: "error", role: "alert" }, `At most ${money(fromCents(left), p.currency)} can still be refunded.`));
        amount.focus();
        return;
      }
      cents = c;
    }
    const why = reason.value.trim();
    const where = destination?.value;
    const yes = await confirmRefund(p, cents, left, where === "balance" ? "balance" : "gateway", why, captured);
    if (!yes) return;
    await send(submit, cents, raw === "", where, why);
  });
  return form;
}

function confirmTransferForm(p: PaymentRecord, reload: Reload): HTMLElement {
  const reference = h("input", { name: "reference", autocomplete: "off", maxlength: 200, size: 30 });
  const submit = h("button", { type: "submit", class: "primary" }, "Confirm bank transfer…");
  const errors = alertSlot();
  const confirmKey = new MoneyKey();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Confirm bank transfer" },
    h("h3", null, "Bank transfer received"),
    field(
      "Bank statement reference",
      reference,
      `The bank's own reference of the incoming transfer (its transaction number on the statement), kept as proof. Not the transfer reference the customer quoted (${transferReference(p.id)}).`,
    ),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!reference.value.trim()) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter the bank statement's reference of the transfer."));
      reference.focus();
      return;
    }
    const yes = await confirmDialog({
      title: "Confirm the bank transfer?",
      body: h(
        "p",
        null,
        p.status === "failed"
          ? `This payment failed (${p.failureReason || "its order closed"}): the ${money(p.amount, p.currency)} that arrived is recorded as money to return, which you can then credit to the customer's balance or send back.`
          : `The payment of ${money(p.amount, p.currency)} becomes successful and its order is marked paid.`,
      ),
      confirm: "Confirm transfer",
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      const req = { paymentId: p.id, reference: reference.value.trim() };
      await gateways.confirmBankTransfer(req, confirmKey.options(req));
    });
    if (ok) {
      announce("Bank transfer confirmed.");
      reload();
    }
  });
  return form;
}

function syncButton(p: PaymentRecord, reload: Reload): HTMLElement {
  const btn = h("button", { type: "button" }, "Ask the gateway for the status");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const ok = await busy(btn, errors, async () => {
      const res = await payments.queryPaymentStatus({ paymentId: p.id });
      announce(`The gateway reports: ${res.payment?.status ?? "unknown"}.`);
    });
    if (ok) reload();
  });
  return h("div", { class: "action-form" }, h("h3", null, "Synchronise"), btn, errors);
}
