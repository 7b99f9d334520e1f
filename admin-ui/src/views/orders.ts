import { orders, payments } from "../api";
import { h, replace, type Child } from "../dom";
import { dateTime, fromLocalInput, money, timeZoneName, toLocalInput } from "../format";
import type { Order, PlanChange, Product, ServicePeriod } from "../gen/billing/order/order_pb";
import { canSetRenewal, extendBlocked, isRecurring, planChangeMoney, planTargets, planWhens, suspendReasonText } from "../renewals";
import type { RouteContext } from "../router";
import { choice, listScreen, textFilter } from "../list";
import { ListOrdersRequestAllowed } from "../gen/billing/order/order_allowed";
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
  table,
  type Column,
} from "../ui";
import { auditLink } from "./audit";
import { invoiceLink } from "./invoices";
import { cycleLabel } from "./products";
import { interfaceNames, paymentColumns } from "./payments";

export const orderColumns: Column<Order>[] = [
  { header: "Order", cell: (o) => idLink(`orders/${o.id}`, o.id) },
  { header: "Status", cell: (o) => badge(o.status) },
  { header: "Total", numeric: true, cell: (o) => money(o.totalAmount, o.currency) },
  { header: "Customer", cell: (o) => idLink(`customers/${o.customerId}`, o.customerId) },
  { header: "Description", cell: (o) => o.description || "—" },
  { header: "Created", cell: (o) => dateTime(o.createdAt) },
  { header: "Paid", cell: (o) => dateTime(o.paidAt) },
];

export function ordersView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Orders",
    what: "orders",
    filters: {
      label: "Filter orders",
      fields: [
        field("Status", choice(query, "status", ListOrdersRequestAllowed.status)),
        field("Customer", textFilter(query, "customer", { placeholder: "customer UUID", size: 38 })),
      ],
    },
    load: async (q) => {
      const res = await orders.listOrders({ pagination: q.pagination, status: q.get("status"), customerId: q.get("customer") }, { signal });
      return { rows: res.orders, meta: res.meta };
    },
    caption: "Orders",
    columns: orderColumns,
    empty: (q) => (q.filtered ? "No orders match these filters." : "No orders yet."),
  }).element;
}

export function orderDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("order", async () => {
        const { order, periods } = await orders.getOrder({ id }, { signal });
        const o = order!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "order-facts" },
            h("h2", { id: "order-facts" }, "Details"),
            facts(orderFacts(o)),
          ),
          isRecurring(o)
            ? h(
                "section",
                { class: "card", "aria-labelledby": "order-periods" },
                h("h2", { id: "order-periods" }, "Service periods"),
                periods.length ? table("Service periods", periodColumns, periods) : empty("No service period yet: the first starts when the order goes active."),
              )
            : null,
          actionsCard(o, periods, load),
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

/** The order's facts; a recurring order's paid end and renewal, and a
 * suspended one's reason, among them. */
function orderFacts(o: Order): [string, Child][] {
  const rows: [string, Child][] = [["Status", h("span", { "data-testid": "order-status" }, badge(o.status))]];
  if (o.status === "suspended") {
    rows.push(["Suspended", h("span", { "data-testid": "suspend-reason" }, suspendReasonText(o.suspendReason))]);
  }
  rows.push(
    ["Total", money(o.totalAmount, o.currency)],
    ["Billing cycle", cycleLabel(o.billingCycle)],
    ["Renewal price", o.renewalPrice ? money(o.renewalPrice, o.currency) : ""],
  );
  if (isRecurring(o)) {
    rows.push(
      ["Paid until", h("span", { "data-testid": "paid-until" }, dateTime(o.paidUntil))],
      ["Renews", h("span", { "data-testid": "renews" }, o.renews ? "yes" : "no")],
    );
  }
  rows.push(
    ["Customer", link(`customers/${o.customerId}`, h("code", null, o.customerId))],
    ["Product", o.productId ? h("code", null, o.productId) : ""],
    ["Description", o.description],
    ["Paid", dateTime(o.paidAt)],
    ["Cancelled", o.cancelledAt ? `${dateTime(o.cancelledAt)} (${o.cancelReason})` : ""],
    ["Created", dateTime(o.createdAt)],
    ["Updated", dateTime(o.updatedAt)],
  );
  return rows;
}

const periodColumns: Column<ServicePeriod>[] = [
  { header: "Period", numeric: true, cell: (p) => String(p.period) },
  { header: "Start", cell: (p) => dateTime(p.startsAt) },
  { header: "End", cell: (p) => dateTime(p.endsAt) },
  { header: "Status", cell: (p) => badge(p.status) },
  { header: "Paid", cell: (p) => dateTime(p.paidAt) },
  { header: "Outcome", cell: (p) => p.outcome || "—" },
  { header: "Invoice", cell: (p) => (p.invoiceId ? invoiceLink(p.invoiceId) : p.period === 1 ? "with the order" : "—") },
];

/** The admin actions the order's status allows, in one card; none for a
 * one-time order past pending. After each, the order is read again. */
function actionsCard(o: Order, periods: ServicePeriod[], reload: () => void): HTMLElement | null {
  const forms: (HTMLElement | null)[] = [
    o.status === "pending" ? cancelForm(o, reload) : null,
    o.status === "active" ? suspendForm(o, reload) : null,
    o.status === "suspended" ? resumeForm(o, reload) : null,
    isRecurring(o) && (o.status === "active" || o.status === "suspended") ? extendForm(o, periods, reload) : null,
    isRecurring(o) && o.status === "active" && !o.pendingPlanChange ? planForm(o, reload) : null,
    o.pendingPlanChange ? pendingPlanForm(o, o.pendingPlanChange, reload) : null,
    isRecurring(o) && (o.status === "active" || o.status === "suspended") ? endForm(o, reload) : null,
    canSetRenewal(o) ? renewalForm(o, reload) : null,
    canSetRenewal(o) ? autoChargeForm(o) : null,
  ];
  if (!forms.some(Boolean)) return null;
  return h("section", { class: "card", "aria-labelledby": "order-actions" }, h("h2", { id: "order-actions" }, "Actions"), forms);
}

function cancelForm(o: Order, reload: () => void): HTMLElement {
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
  return h("div", { class: "action-form" }, btn, errors);
}

/** A required reason, kept in the audit log. */
function reasonInput(): HTMLInputElement {
  return h("input", { name: "reason", required: true, maxlength: 500, size: 40, autocomplete: "off" });
}

/** Checks that the reason is given; otherwise says so and focuses it. */
function reasonGiven(reason: HTMLInputElement, errors: HTMLElement): boolean {
  if (reason.value.trim()) return true;
  replace(errors, h("div", { class: "error", role: "alert" }, "Say why in the reason."));
  reason.focus();
  return false;
}

/** OrderService.SuspendOrder: the provider suspends the service; paying a
 * renewal invoice does not resume it. */
function suspendForm(o: Order, reload: () => void): HTMLElement {
  const reason = reasonInput();
  const submit = h("button", { type: "submit", class: "danger" }, "Suspend…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Suspend" },
    h("h3", null, "Suspend"),
    field("Reason", reason, "Why; kept in the audit log."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!reasonGiven(reason, errors)) return;
    const yes = await confirmDialog({
      title: "Suspend this order?",
      body: h("p", null, "The provider suspends the service now. Paying a renewal invoice does not resume it: only resuming it here does."),
      confirm: "Suspend order",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      await orders.suspendOrder({ orderId: o.id, reason: reason.value.trim() });
    });
    if (ok) {
      announce("Order suspended.");
      reload();
    }
  });
  return form;
}

/** OrderService.EndService: the service ends now, with the credit the
 * admin chooses for the unused share of the paid period. The amount is
 * quoted first (dry_run) and shown in the confirmation, before anything
 * changes. */
function endForm(o: Order, reload: () => void): HTMLElement {
  const credit = h(
    "select",
    { name: "credit" },
    h("option", { value: "none" }, "None: the unused share is kept"),
    h("option", { value: "balance" }, "Balance: credited to the customer's balance"),
    h("option", { value: "gateway" }, "Gateway: refunded to the period's payment"),
  );
  const submit = h("button", { type: "submit", class: "danger" }, "End service now…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "End service now" },
    h("h3", null, "End service now"),
    h("p", { class: "hint" }, "The order is terminated now, its open renewal invoice cancelled, and the provider ends the instance."),
    field("Credit", credit, "What becomes of the unused share of the paid period."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const mode = credit.value;
    let unused = "";
    let credited = "";
    const quoted = await busy(submit, errors, async () => {
      const q = await orders.endService({ orderId: o.id, credit: mode, dryRun: true });
      unused = q.unused;
      credited = q.credited;
    });
    if (!quoted) return;
    const yes = await confirmDialog({
      title: "End this service now?",
      body: h(
        "div",
        null,
        h("p", null, "The order is terminated now, its open renewal invoice cancelled, and the provider ends the instance. This cannot be undone."),
        facts([
          ["Unused share now", h("span", { "data-testid": "end-unused" }, money(unused, o.currency))],
          [
            mode === "none" ? "Credited (kept)" : mode === "balance" ? "Credited to the balance" : "Refunded to the payment",
            h("span", { "data-testid": "end-credited" }, money(credited, o.currency)),
          ],
        ]),
      ),
      confirm: "End service",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      await orders.endService({ orderId: o.id, credit: mode });
    });
    if (ok) {
      announce("Service ended.");
      reload();
    }
  });
  return form;
}

const whenLabels: Record<string, string> = { now: "Now (prorated)", period_end: "At the period end" };

/** OrderService.ChangeOrderPlan: the order moves to another recurring
 * product in its currency, now or at the period end. The change is quoted
 * first (dry_run) and the amount shown in the confirmation, before
 * anything changes. */
function planForm(o: Order, reload: () => void): HTMLElement {
  return loadBlock("products", async () => {
    const res = await orders.listProducts({ pagination: { page: 1, pageSize: 100 }, enabled: true });
    const targets = planTargets(o, res.products);
    if (!targets.length) {
      return h("div", { class: "action-form" }, h("h3", null, "Change plan"), h("p", { class: "hint" }, `No other enabled recurring product in ${o.currency}.`));
    }
    const product = h(
      "select",
      { name: "product" },
      targets.map((p) => h("option", { value: p.id }, `${p.name} (${money(p.price, p.currency)}, ${cycleLabel(p.billingCycle)})`)),
    );
    const when = h("select", { name: "when" });
    const fillWhen = () => {
      const p = targets.find((t) => t.id === product.value)!;
      replace(when, planWhens(o, p).map((w) => h("option", { value: w }, whenLabels[w])));
    };
    product.addEventListener("change", fillWhen);
    fillWhen();
    const submit = h("button", { type: "submit" }, "Change plan…");
    const errors = alertSlot();
    const form = h(
      "form",
      { class: "action-form", "aria-label": "Change plan" },
      h("h3", null, "Change plan"),
      field("Product", product, `Recurring products in ${o.currency}.`),
      field("When", when, "Now prorates the rest of the period (a change of cycle is at the period end only); at the period end the next renewal bills the new product."),
      errors,
      submit,
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const to: Product | undefined = targets.find((t) => t.id === product.value);
      if (!to || !when.value) {
        replace(errors, h("div", { class: "error", role: "alert" }, "This product cannot be taken now: the order does not renew and its cycle differs."));
        return;
      }
      const req = { orderId: o.id, productId: to.id, when: when.value };
      let quote: PlanChange | undefined;
      const quoted = await busy(submit, errors, async () => {
        quote = (await orders.changeOrderPlan({ ...req, dryRun: true })).change;
      });
      if (!quoted || !quote) return;
      const [label, amount] = planChangeMoney(quote);
      const yes = await confirmDialog({
        title: "Change this order's plan?",
        body: h(
          "div",
          null,
          h("p", null, `From ${money(quote.fromPrice, o.currency)} to ${to.name} at ${money(quote.toPrice, o.currency)} (${cycleLabel(quote.toCycle)}), ${whenLabels[quote.when]?.toLowerCase()}.`),
          facts([[label, h("span", { "data-testid": "plan-quote" }, money(amount, o.currency))]]),
          quote.when === "now" && !quote.amount.startsWith("-")
            ? h("p", { class: "hint" }, "An invoice is issued for it; the order takes the new plan once it is paid (the balance pays it at once when it covers it).")
            : null,
        ),
        confirm: "Change plan",
      });
      if (!yes) return;
      const ok = await busy(submit, errors, async () => {
        await orders.changeOrderPlan(req);
      });
      if (ok) {
        announce("Plan change made.");
        reload();
      }
    });
    return form;
  });
}

/** The order's pending plan change and OrderService.CancelPlanChange. */
function pendingPlanForm(o: Order, c: PlanChange, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: "danger" }, "Cancel plan change…");
  const errors = alertSlot();
  const [label, amount] = planChangeMoney(c);
  btn.addEventListener("click", async () => {
    const yes = await confirmDialog({
      title: "Cancel the plan change?",
      body: h("p", null, c.invoiceId ? "The change is withdrawn and its unpaid invoice cancelled." : "The change is withdrawn; the order keeps its plan."),
      confirm: "Cancel plan change",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(btn, errors, async () => {
      await orders.cancelPlanChange({ orderId: o.id });
    });
    if (ok) {
      announce("Plan change cancelled.");
      reload();
    }
  });
  return h(
    "div",
    { class: "action-form", "data-testid": "pending-plan-change" },
    h("h3", null, "Pending plan change"),
    facts([
      ["To", h("code", null, c.toProductId)],
      ["New price", `${money(c.toPrice, c.currency)} (${cycleLabel(c.toCycle)})`],
      ["When", whenLabels[c.when] ?? c.when],
      [label, h("span", { "data-testid": "pending-plan-amount" }, money(amount, c.currency))],
      ["Invoice", c.invoiceId ? invoiceLink(c.invoiceId) : ""],
      ["Lapses", c.lapseAt ? dateTime(c.lapseAt) : ""],
    ]),
    btn,
    errors,
  );
}

/** OrderService.ResumeOrder. One suspended for an unpaid renewal invoice
 * is refused (the service's message says so): paying the invoice resumes
 * it. */
function resumeForm(o: Order, reload: () => void): HTMLElement {
  const reason = reasonInput();
  const submit = h("button", { type: "submit", class: "primary" }, "Resume");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Resume" },
    h("h3", null, "Resume"),
    o.suspendReason === "overdue" ? h("p", { class: "hint" }, "Suspended for an unpaid renewal invoice: paying the invoice resumes the service.") : null,
    field("Reason", reason, "Why; kept in the audit log."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!reasonGiven(reason, errors)) return;
    const ok = await busy(submit, errors, async () => {
      await orders.resumeOrder({ orderId: o.id, reason: reason.value.trim() });
    });
    if (ok) {
      announce("Order resumed.");
      reload();
    }
  });
  return form;
}

/** OrderService.ExtendServicePeriod: the current paid period ends later,
 * at a time the admin picks in their own time zone. */
function extendForm(o: Order, periods: ServicePeriod[], reload: () => void): HTMLElement {
  const blocked = extendBlocked(o, periods);
  if (blocked) {
    return h("div", { class: "action-form" }, h("h3", null, "Extend the paid period"), h("p", { class: "hint" }, blocked));
  }
  const end = h("input", { type: "datetime-local", name: "ends_at", required: true, min: toLocalInput(o.paidUntil) });
  const reason = reasonInput();
  const submit = h("button", { type: "submit" }, "Extend");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Extend the paid period" },
    h("h3", null, "Extend the paid period"),
    field("New end", end, `In your time zone (${timeZoneName()}); after the current end, ${dateTime(o.paidUntil)}. Later periods count from it.`),
    field("Reason", reason, "Why; kept in the audit log."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const endsAt = fromLocalInput(end.value);
    if (endsAt === null) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter the new end: a date and a time."));
      end.focus();
      return;
    }
    if (!reasonGiven(reason, errors)) return;
    const ok = await busy(submit, errors, async () => {
      await orders.extendServicePeriod({ orderId: o.id, endsAt, reason: reason.value.trim() });
    });
    if (ok) {
      announce(`Paid period extended to ${dateTime(endsAt)}.`);
      reload();
    }
  });
  return form;
}

/** OrderService.SetOrderRenewal: off, the order is billed no more and its
 * service ends at its paid end; on, it renews again. */
function renewalForm(o: Order, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button" }, o.renews ? "Turn renewal off" : "Turn renewal on");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const renews = !o.renews;
    const ok = await busy(btn, errors, async () => {
      await orders.setOrderRenewal({ orderId: o.id, renews });
    });
    if (ok) {
      announce(renews ? "Renewal on: the order is billed for its next period." : "Renewal off: the service ends at its paid end.");
      reload();
    }
  });
  return h(
    "div",
    { class: "action-form" },
    h("h3", null, "Renewal"),
    h(
      "p",
      { class: "hint" },
      o.renews
        ? "The order is billed for each next period. Turned off, no further invoice is issued and the service ends when its paid period does."
        : "Renewal is off: no further invoice is issued, and the service ends when its paid period does.",
    ),
    btn,
    errors,
  );
}

/** PaymentService.GetAutoCharge and SetAutoCharge: whether the order's
 * renewal invoices charge the customer's saved card on their due day. */
function autoChargeForm(o: Order): HTMLElement {
  const slot = h("div");
  const show = (on: boolean) => {
    const btn = h("button", { type: "button" }, on ? "Turn card charging off" : "Turn card charging on");
    const errors = alertSlot();
    btn.addEventListener("click", async () => {
      let now = on;
      const ok = await busy(btn, errors, async () => {
        now = (await payments.setAutoCharge({ orderId: o.id, autoCharge: !on })).autoCharge;
      });
      if (ok) {
        announce(now ? "Renewals charge the saved card." : "Renewals no longer charge the saved card.");
        show(now);
      }
    });
    replace(
      slot,
      h(
        "p",
        { class: "hint" },
        "Charge the saved card: ",
        h("strong", { "data-testid": "auto-charge" }, on ? "on" : "off"),
        on ? ". Renewal invoices charge the customer's saved card on their due day (when they have one)." : ". Renewal invoices wait to be paid by hand.",
      ),
      btn,
      errors,
    );
  };
  return h(
    "div",
    { class: "action-form" },
    h("h3", null, "Card renewals"),
    loadBlock("card renewals", async () => {
      show((await payments.getAutoCharge({ orderId: o.id })).autoCharge);
      return slot;
    }),
  );
}
