import { orders, payments } from "../api";
import { h, replace } from "../dom";
import { dateTime, money } from "../format";
import type { Order } from "../gen/billing/order/order_pb";
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
import { auditLink } from "./audit";
import { interfaceNames, paymentColumns } from "./payments";

export const orderStatuses = ["pending", "paid", "provisioning", "active", "cancelled", "suspended", "refunded", "completed", "terminated"] as const;

export const orderColumns: Column<Order>[] = [
  { header: "Order", cell: (o) => idLink(`orders/${o.id}`, o.id) },
  { header: "Status", cell: (o) => badge(o.status) },
  { header: "Total", numeric: true, cell: (o) => money(o.totalAmount, o.currency) },
  { header: "Customer", cell: (o) => idLink(`customers/${o.customerId}`, o.customerId) },
  { header: "Description", cell: (o) => o.description || "—" },
  { header: "Created", cell: (o) => dateTime(o.createdAt) },
  { header: "Paid", cell: (o) => dateTime(o.paidAt) },
];

function pageOf(q: URLSearchParams): number {
  const n = Number.parseInt(q.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

export function ordersView({ query, signal }: RouteContext): HTMLElement {
  const status = h(
    "select",
    { name: "status" },
    h("option", { value: "" }, "Any"),
    orderStatuses.map((s) => h("option", { value: s, selected: query.get("status") === s }, s)),
  );
  const customer = h("input", { name: "customer", value: query.get("customer") ?? "", placeholder: "customer UUID", spellcheck: "false", size: 38 });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter orders" },
    field("Status", status),
    field("Customer", customer),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ status: status.value, customer: customer.value.trim(), page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ status: undefined, customer: undefined, page: undefined });
  });
  const list = loadBlock("orders", async () => {
    const res = await orders.listOrders(
      {
        pagination: { page: pageOf(query), pageSize: 20 },
        status: query.get("status") || undefined,
        customerId: query.get("customer") || undefined,
      },
      { signal },
    );
    if (res.orders.length === 0) {
      return empty(query.toString() ? "No orders match these filters." : "No orders yet.");
    }
    return [table("Orders", orderColumns, res.orders), pager(res.meta, (p) => setQuery({ page: String(p) }))];
  });
  return h("section", null, pageTitle("Orders"), form, list);
}

export function orderDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("order", async () => {
        const { order } = await orders.getOrder({ id }, { signal });
        const o = order!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "order-facts" },
            h("h2", { id: "order-facts" }, "Details"),
            facts([
              ["Status", badge(o.status)],
              ["Total", money(o.totalAmount, o.currency)],
              ["Customer", link(`customers/${o.customerId}`, h("code", null, o.customerId))],
              ["Product", o.productId ? h("code", null, o.productId) : ""],
              ["Description", o.description],
              ["Paid", dateTime(o.paidAt)],
              ["Cancelled", o.cancelledAt ? `${dateTime(o.cancelledAt)} (${o.cancelReason})` : ""],
              ["Created", dateTime(o.createdAt)],
              ["Updated", dateTime(o.updatedAt)],
            ]),
          ),
          o.status === "pending" ? cancelBlock(o, load) : null,
          h(
            "section",
            { class: "card", "aria-labelledby": "order-payments" },
            h("h2", { id: "order-payments" }, "Payments"),
            loadBlock("payments", async () => {
              const res = await payments.listPayments({ pagination: { page: 1, pageSize: 100 }, orderId: o.id }, { signal });
              return res.payments.length ? table("Payments of this order", paymentColumns(await interfaceNames()), res.payments) : empty("No payments for this order.");
            }),
          ),
        );
      }),
    );
  load();
  return h("section", null, pageTitle("Order", h("p", { class: "subtitle" }, h("code", null, id)), h("p", { class: "card-links" }, auditLink("order", id, "This order in the audit log"))), body);
}

function cancelBlock(o: Order, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: "danger" }, "Cancel order…");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const yes = await confirmDialog({
      title: "Cancel this order?",
      body: h("p", null, "The order is cancelled and its pending payments fail. This cannot be undone."),
      confirm: "Cancel order",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(btn, errors, async () => {
      await orders.cancelOrder({ orderId: o.id });
    });
    if (ok) {
      announce("Order cancelled.");
      reload();
    }
  });
  return h("section", { class: "card", "aria-labelledby": "order-actions" }, h("h2", { id: "order-actions" }, "Actions"), btn, errors);
}
