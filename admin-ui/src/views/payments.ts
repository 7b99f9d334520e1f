import { gateways, orders, paymentAdmin, payments } from "../api";
import { h, replace, type Child } from "../dom";
import { dateTime, fromCents, money, prettyJSON, refundable, shortId, toCents } from "../format";
import type { PaymentRecord, Refund } from "../gen/billing/payment/payment_pb";
import type { AuditEntry } from "../gen/billing/payment/payment_admin_pb";
import { setQuery, type RouteContext } from "../router";
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
  pager,
  pageTitle,
  table,
  type Column,
} from "../ui";

export const paymentStatuses = ["pending", "success", "failed", "refunded"] as const;

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
    { header: "Status", cell: (p) => badge(p.status) },
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

function page(q: URLSearchParams): number {
  const n = Number.parseInt(q.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

/** Payments with filters (status, order, gateway interface) and paging; the
 * filters live in the URL, so a filtered page can be bookmarked or reloaded. */
export function paymentsView({ query, signal }: RouteContext): HTMLElement {
  const status = h(
    "select",
    { name: "status" },
    h("option", { value: "" }, "Any"),
    paymentStatuses.map((s) => h("option", { value: s, selected: query.get("status") === s }, s)),
  );
  const order = h("input", { name: "order", value: query.get("order") ?? "", placeholder: "order UUID", spellcheck: "false", size: 38 });
  // A select of the gateway interfaces once their names are known; a UUID
  // field until then, or when the server has no gateway API.
  let iface: HTMLInputElement | HTMLSelectElement = h("input", { name: "interface", value: query.get("interface") ?? "", placeholder: "gateway interface UUID", spellcheck: "false", size: 38 });
  void interfaceNames().then((names) => {
    if (names.size === 0 || signal.aborted) return;
    const current = query.get("interface") ?? "";
    const sel = h(
      "select",
      { name: "interface", id: iface.id },
      h("option", { value: "" }, "Any"),
      [...names].map(([id, name]) => h("option", { value: id, selected: id === current }, name)),
      current && !names.has(current) ? h("option", { value: current, selected: true }, current) : null,
    );
    iface.replaceWith(sel);
    iface = sel;
  });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter payments" },
    field("Status", status),
    field("Order", order),
    field("Gateway interface", iface),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ status: status.value, order: order.value.trim(), interface: iface.value.trim(), page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ status: undefined, order: undefined, interface: undefined, page: undefined });
  });

  const list = loadBlock("payments", async () => {
    const res = await payments.listPayments(
      {
        pagination: { page: page(query), pageSize: 20 },
        status: query.get("status") || undefined,
        orderId: query.get("order") || undefined,
        gatewayInterfaceId: query.get("interface") || undefined,
      },
      { signal },
    );
    if (res.payments.length === 0) {
      return empty(query.toString() ? "No payments match these filters." : "No payments yet.");
    }
    return [table("Payments", paymentColumns(await interfaceNames()), res.payments), pager(res.meta, (p) => setQuery({ page: String(p) }))];
  });
  return h("section", null, pageTitle("Payments"), form, list);
}

/** One payment: its facts, its order, refunds and audit trail where the
 * server exposes them, and the admin actions its status allows. */
export function paymentDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("payment", async () => {
        const res = await payments.getPayment({ id }, { signal });
        return paymentBody(res.payment!, signal, load);
      }),
    );
  load();
  return h("section", null, pageTitle("Payment", h("p", { class: "subtitle" }, h("code", null, id))), body);
}

function paymentBody(p: PaymentRecord, signal: AbortSignal, reload: () => void): HTMLElement {
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
        ["Invoice", p.invoiceId ? h("code", null, p.invoiceId) : ""],
        ["Gateway interface", p.gatewayInterfaceId ? interfaceLink(p.gatewayInterfaceId) : "customer balance"],
        ["Gateway payment id", p.gatewayPaymentId],
        ["Gateway transaction", p.gatewayTxId],
        ["Paid", dateTime(p.paidAt)],
        ["Created", dateTime(p.createdAt)],
        ["Updated", dateTime(p.updatedAt)],
      ]),
    ),
    actions(p, reload),
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
        const { refunds } = await paymentAdmin.listRefunds({ paymentId: p.id }, { signal });
        return refunds.length ? table("Refunds of this payment", refundColumns(p.currency), refunds) : empty("No refunds of this payment.");
      }),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-audit" },
      h("h2", { id: "payment-audit" }, "Audit trail"),
      loadBlock("audit trail", () => auditTrail(p, signal)),
    ),
  );
}

function refundColumns(currency: string): Column<Refund>[] {
  return [
    { header: "Refund", cell: (r) => h("code", { title: r.id }, shortId(r.id)) },
    { header: "Status", cell: (r) => badge(r.status) },
    { header: "Amount", numeric: true, cell: (r) => money(r.amount, currency) },
    { header: "Reason", cell: (r) => r.reason || "—" },
    { header: "Gateway refund id", cell: (r) => (r.gatewayRefundId ? h("code", null, r.gatewayRefundId) : "—") },
    { header: "Error", cell: (r) => r.error || "—" },
    { header: "Requested by", cell: (r) => (r.requestedBy ? h("code", { title: r.requestedBy }, shortId(r.requestedBy)) : "system") },
    { header: "Created", cell: (r) => dateTime(r.createdAt) },
    { header: "Updated", cell: (r) => dateTime(r.updatedAt) },
  ];
}

/** How many entries of each entity the trail shows (the newest). */
const auditPageSize = 50;

/** The payment's audit entries and its order's, merged newest first. */
async function auditTrail(p: PaymentRecord, signal: AbortSignal): Promise<Child> {
  const entities: [string, string][] = [["payment", p.id]];
  if (p.orderId) entities.push(["order", p.orderId]);
  const pages = await Promise.all(
    entities.map(([entityType, entityId]) =>
      paymentAdmin.listAuditEntries({ entityType, entityId, pagination: { page: 1, pageSize: auditPageSize } }, { signal }),
    ),
  );
  const entries = pages.flatMap((res) => res.entries);
  if (entries.length === 0) {
    return empty("No audit entries for this payment or its order.");
  }
  // RFC 3339 in UTC sorts as text; the id orders rows of one instant.
  entries.sort((a, b) => (a.createdAt === b.createdAt ? Number(BigInt(b.id) - BigInt(a.id)) : a.createdAt < b.createdAt ? 1 : -1));
  const total = pages.reduce((n, res) => n + Number(res.meta?.total ?? 0n), 0);
  return [
    table("Audit trail of this payment and its order", auditColumns, entries),
    total > entries.length ? h("p", { class: "subtitle" }, `Showing the newest ${entries.length} of ${total} entries.`) : null,
  ];
}

const auditColumns: Column<AuditEntry>[] = [
  { header: "Time", cell: (a) => dateTime(a.createdAt) },
  { header: "Action", cell: (a) => h("code", null, a.action) },
  { header: "Entity", cell: (a) => [a.entityType, " ", h("code", { title: a.entityId }, shortId(a.entityId))] },
  { header: "Actor", cell: (a) => [a.actorKind, a.actorId ? " " : "", a.actorId ? h("code", { title: a.actorId }, shortId(a.actorId)) : ""] },
  { header: "Change", cell: (a) => auditChange(a) },
];

/** Before and after as pretty JSON, folded; text only. */
function auditChange(a: AuditEntry): HTMLElement | string {
  if (!a.before && !a.after) return "—";
  return h(
    "details",
    null,
    h("summary", null, a.before && a.after ? "before / after" : a.after ? "after" : "before"),
    a.before ? [h("h4", null, "Before"), h("pre", { class: "json" }, prettyJSON(a.before))] : null,
    a.after ? [h("h4", null, "After"), h("pre", { class: "json" }, prettyJSON(a.after))] : null,
  );
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

function actions(p: PaymentRecord, reload: () => void): HTMLElement | null {
  const blocks: HTMLElement[] = [];
  if (p.status === "success") {
    blocks.push(refundForm(p, reload));
  }
  if (p.status === "pending" && p.gatewayInterfaceId) {
    // Only a bank-transfer payment is confirmed by hand; the interface says
    // which plugin it goes through.
    blocks.push(
      loadBlock("gateway interface", async () => {
        const { gatewayInterface } = await gateways.getGatewayInterface({ id: p.gatewayInterfaceId });
        return gatewayInterface?.pluginName === "bank_transfer" ? confirmTransferForm(p, reload) : null;
      }),
    );
    blocks.push(syncButton(p, reload));
  }
  if (blocks.length === 0) {
    return null;
  }
  return h("section", { class: "card", "aria-labelledby": "payment-actions" }, h("h2", { id: "payment-actions" }, "Actions"), blocks);
}

function refundForm(p: PaymentRecord, reload: () => void): HTMLElement {
  const left = refundable(p.amount, p.refundedAmount);
  const amount = h("input", { name: "amount", inputmode: "decimal", autocomplete: "off", placeholder: fromCents(left), size: 12 });
  const submit = h("button", { type: "submit", class: "danger" }, "Refund…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Refund" },
    h("h3", null, "Refund"),
    field("Amount", amount, `Leave empty to refund everything not yet refunded (${money(fromCents(left), p.currency)}).`),
    errors,
    submit,
  );
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
    const full = cents === left;
    const yes = await confirmDialog({
      title: full ? "Refund in full?" : "Refund part of this payment?",
      body: h("p", null, `Refund ${money(fromCents(cents), p.currency)} of payment `, h("code", null, p.id.slice(0, 8)), full ? ". Nothing will be left to refund." : `. ${money(fromCents(left - cents), p.currency)} will remain refundable.`),
      confirm: `Refund ${money(fromCents(cents), p.currency)}`,
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      // An empty amount asks the service to refund the whole remainder.
      await payments.refundPayment({ paymentId: p.id, amount: raw === "" ? "" : fromCents(cents) });
    });
    if (ok) {
      announce(`Refunded ${money(fromCents(cents), p.currency)}.`);
      reload();
    }
  });
  return form;
}

function confirmTransferForm(p: PaymentRecord, reload: () => void): HTMLElement {
  const reference = h("input", { name: "reference", autocomplete: "off", maxlength: 200, size: 30 });
  const submit = h("button", { type: "submit", class: "primary" }, "Confirm bank transfer…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Confirm bank transfer" },
    h("h3", null, "Bank transfer received"),
    field("Bank reference", reference, "The transfer's reference from the bank statement."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!reference.value.trim()) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter the bank reference of the transfer."));
      reference.focus();
      return;
    }
    const yes = await confirmDialog({
      title: "Confirm the bank transfer?",
      body: h("p", null, `The payment of ${money(p.amount, p.currency)} becomes successful and its order is marked paid.`),
      confirm: "Confirm transfer",
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      await gateways.confirmBankTransfer({ paymentId: p.id, reference: reference.value.trim() });
    });
    if (ok) {
      announce("Bank transfer confirmed.");
      reload();
    }
  });
  return form;
}

function syncButton(p: PaymentRecord, reload: () => void): HTMLElement {
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
