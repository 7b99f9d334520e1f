import { customers, orders, payments } from "../api";
import { MoneyKey } from "../money_key";
import { h, replace } from "../dom";
import { dateTime, fromCents, money, toCents } from "../format";
import type { Customer } from "../gen/billing/identity/identity_pb";
import type { SavedPaymentMethod } from "../gen/billing/payment/payment_pb";
import type { RouteContext } from "../router";
import { listScreen, textFilter } from "../list";
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
import { orderColumns } from "./orders";

/** A saved card as the API shows it: brand, last four digits, expiry. */
function cardName(m: SavedPaymentMethod): string {
  return `${m.brand || "card"} •••• ${m.last4}`;
}

/** The saved cards, each with its Remove action (reload: read them again). */
function savedMethodColumns(reload: () => void): Column<SavedPaymentMethod>[] {
  return [
    { header: "Card", cell: (m) => cardName(m) },
    { header: "Expires", cell: (m) => `${String(m.expMonth).padStart(2, "0")}/${m.expYear}` },
    { header: "Saved", cell: (m) => dateTime(m.createdAt) },
    { header: "Actions", cell: (m) => removeCardButton(m, reload) },
  ];
}

/** PaymentService.RemoveSavedPaymentMethod, confirmed first: the gateway
 * detaches the card, and renewals no longer charge it. */
function removeCardButton(m: SavedPaymentMethod, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: "danger", "aria-label": `Remove ${cardName(m)}` }, "Remove…");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const yes = await confirmDialog({
      title: `Remove ${cardName(m)}?`,
      body: h("p", null, "The gateway detaches the card, and renewal invoices no longer charge it: they wait to be paid by hand until the customer saves another. This cannot be undone."),
      confirm: "Remove card",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(btn, errors, async () => {
      await payments.removeSavedPaymentMethod({ id: m.id });
    });
    if (ok) {
      announce("Card removed.");
      reload();
    }
  });
  return h("div", null, btn, errors);
}

const columns: Column<Customer>[] = [
  { header: "Customer", cell: (c) => idLink(`customers/${c.id}`, c.id) },
  { header: "E-mail", cell: (c) => c.email },
  { header: "Name", cell: (c) => c.name || "—" },
  { header: "Balance", numeric: true, cell: (c) => money(c.balance, c.currency) },
  { header: "Credit limit", numeric: true, cell: (c) => money(c.creditLimit, c.currency) },
  { header: "API keys", cell: (c) => (c.canCreateApiKeys ? "allowed" : "not allowed") },
  { header: "Status", cell: (c) => badge(c.disabledAt ? "disabled" : "active") },
  { header: "Created", cell: (c) => dateTime(c.createdAt) },
];

export function customersView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Customers",
    what: "customers",
    filters: {
      label: "Find customers",
      fields: [field("E-mail contains", textFilter(query, "email", { type: "search", maxlength: 254, size: 30, spellcheck: null }))],
      submit: "Search",
    },
    load: async (q) => {
      const res = await customers.listCustomers({ pagination: q.pagination, emailContains: q.get("email") }, { signal });
      return { rows: res.customers, meta: res.meta };
    },
    caption: "Customers",
    columns,
    empty: (q) => (q.filtered ? "No customer's e-mail contains this text." : "No customers yet."),
  }).element;
}

export function customerDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("customer", async () => {
        const { customer } = await customers.getCustomer({ id }, { signal });
        const c = customer!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "customer-facts" },
            h("h2", { id: "customer-facts" }, "Details"),
            facts([
              ["E-mail", c.email],
              ["Name", c.name],
              ["Balance", h("span", { "data-testid": "balance" }, money(c.balance, c.currency))],
              ["Credit limit", money(c.creditLimit, c.currency)],
              ["Status", h("span", { "data-testid": "customer-status" }, badge(c.disabledAt ? "disabled" : "active"))],
              ["Disabled", dateTime(c.disabledAt)],
              ["Created", dateTime(c.createdAt)],
              ["Updated", dateTime(c.updatedAt)],
            ]),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "customer-actions" },
            h("h2", { id: "customer-actions" }, "Actions"),
            apiKeyToggle(c, load),
            adjustBalanceForm(c, load),
            creditLimitForm(c, load),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "customer-access" },
            h("h2", { id: "customer-access" }, "Access"),
            c.disabledAt ? enableForm(c, load) : disableForm(c, load),
            signOutForm(c, load),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "customer-orders" },
            h("h2", { id: "customer-orders" }, "Orders"),
            loadBlock("orders", async () => {
              const res = await orders.listOrders({ pagination: { page: 1, pageSize: 20 }, customerId: c.id }, { signal });
              return res.orders.length ? table("Orders of this customer", orderColumns, res.orders) : empty("No orders yet.");
            }),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "customer-saved-cards" },
            h("h2", { id: "customer-saved-cards" }, "Saved cards"),
            savedCards(c.id, signal),
          ),
        );
      }),
    );
  load();
  return h(
    "section",
    null,
    pageTitle(
      "Customer",
      h("p", { class: "subtitle" }, h("code", null, id)),
      h(
        "p",
        { class: "card-links" },
        auditLink("customer", id, "This customer in the audit log"),
        " · ",
        link(`audit?${new URLSearchParams({ actor_kind: "customer", actor_id: id }).toString()}`, "What this customer did"),
      ),
    ),
    body,
  );
}

/** CustomerAdminService.SetCanCreateApiKeys as a switch (a button with aria-pressed). */
function apiKeyToggle(c: Customer, reload: () => void): HTMLElement {
  const btn = h(
    "button",
    { type: "button", class: "switch", role: "switch", "aria-checked": c.canCreateApiKeys ? "true" : "false", "aria-describedby": "api-key-hint" },
    h("span", { class: "switch-track", "aria-hidden": "true" }),
    "May create and use API keys",
  );
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const allowed = !c.canCreateApiKeys;
    const ok = await busy(btn, errors, async () => {
      await customers.setCanCreateApiKeys({ customerId: c.id, allowed });
    });
    if (ok) {
      announce(allowed ? "The customer may now create API keys." : "The customer may no longer create or use API keys.");
      reload();
    }
  });
  return h(
    "div",
    { class: "action-form" },
    h("h3", null, "API keys"),
    btn,
    h("small", { id: "api-key-hint", class: "hint" }, "While off, the customer's existing keys are refused too."),
    errors,
  );
}

function adjustBalanceForm(c: Customer, reload: () => void): HTMLElement {
  const amount = h("input", { name: "amount", inputmode: "decimal", autocomplete: "off", required: true, size: 12 });
  const note = h("input", { name: "note", required: true, maxlength: 500, size: 40 });
  const submit = h("button", { type: "submit", class: "primary" }, "Adjust balance…");
  const errors = alertSlot();
  const key = new MoneyKey();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Adjust balance" },
    h("h3", null, "Adjust balance"),
    field("Amount", amount, "Signed: 50 adds, -20.50 deducts."),
    field("Note", note, "Why; kept with the transaction and in the audit log."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const cents = toCents(amount.value);
    if (cents === null || cents === 0n) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter a signed amount other than zero, such as 50 or -20.50."));
      amount.focus();
      return;
    }
    if (!note.value.trim()) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Say why in the note."));
      note.focus();
      return;
    }
    const after = (toCents(c.balance) ?? 0n) + cents;
    const yes = await confirmDialog({
      title: "Adjust the balance?",
      body: h("p", null, `${cents > 0n ? "Add" : "Deduct"} ${money(fromCents(cents < 0n ? -cents : cents), c.currency)}: the balance goes from ${money(c.balance, c.currency)} to ${money(fromCents(after), c.currency)}.`),
      confirm: "Adjust balance",
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      const req = { customerId: c.id, amount: fromCents(cents), note: note.value.trim() };
      await customers.adjustBalance(req, key.options(req));
    });
    if (ok) {
      announce("Balance adjusted.");
      reload();
    }
  });
  return form;
}

function creditLimitForm(c: Customer, reload: () => void): HTMLElement {
  const limit = h("input", { name: "credit_limit", inputmode: "decimal", autocomplete: "off", required: true, value: c.creditLimit, size: 12 });
  const submit = h("button", { type: "submit" }, "Set credit limit");
  const errors = alertSlot();
  const form = h("form", { class: "action-form", "aria-label": "Credit limit" }, h("h3", null, "Credit limit"), field("Credit limit", limit, "How far below zero the balance may go."), errors, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const cents = toCents(limit.value);
    if (cents === null || cents < 0n) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter an amount of at least 0, such as 100 or 250.50."));
      limit.focus();
      return;
    }
    const ok = await busy(submit, errors, async () => {
      await customers.setCreditLimit({ customerId: c.id, creditLimit: fromCents(cents) });
    });
    if (ok) {
      announce("Credit limit set.");
      reload();
    }
  });
  return form;
}

/** CustomerAdminService.DisableCustomer: the login refused, every token and
 * API key refused, on every instance within a second. */
function disableForm(c: Customer, reload: () => void): HTMLElement {
  const reason = h("input", { name: "reason", maxlength: 500, size: 40, autocomplete: "off" });
  const submit = h("button", { type: "submit", class: "danger" }, "Disable account…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Disable account" },
    h("h3", null, "Disable account"),
    field("Reason", reason, "Optional; kept in the audit log."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const yes = await confirmDialog({
      title: "Disable this account?",
      body: h(
        "p",
        null,
        `${c.email} can no longer log in, and every call with their access tokens or API keys is refused. Enabling the account later brings back the login and the API keys, not the tokens.`,
      ),
      confirm: "Disable account",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(submit, errors, async () => {
      await customers.disableCustomer({ customerId: c.id, reason: reason.value.trim() });
    });
    if (ok) {
      announce("Account disabled.");
      reload();
    }
  });
  return form;
}

/** CustomerAdminService.EnableCustomer. */
function enableForm(c: Customer, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: "primary" }, "Enable account");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const ok = await busy(btn, errors, async () => {
      await customers.enableCustomer({ customerId: c.id });
    });
    if (ok) {
      announce("Account enabled: the customer can log in again.");
      reload();
    }
  });
  return h(
    "div",
    { class: "action-form" },
    h("h3", null, "Account disabled"),
    h("p", { class: "hint" }, `Disabled ${dateTime(c.disabledAt)}. Enabling lets the customer log in again and brings back their API keys.`),
    errors,
    btn,
  );
}

/** CustomerAdminService.SignOutEverywhere: every access token ends; the API
 * keys too when asked. */
function signOutForm(c: Customer, reload: () => void): HTMLElement {
  const keys = h("input", { type: "checkbox", name: "revoke_api_keys" });
  const submit = h("button", { type: "submit" }, "Sign out everywhere…");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Sign out everywhere" },
    h("h3", null, "Sign out everywhere"),
    h("p", { class: "hint" }, "Ends every access token the customer holds, on every instance within a second."),
    h("div", { class: "field checkbox" }, h("label", null, keys, " Also revoke their API keys")),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const revokeApiKeys = keys.checked;
    const yes = await confirmDialog({
      title: "Sign the customer out everywhere?",
      body: h("p", null, `Every access token of ${c.email} ends${revokeApiKeys ? ", and every API key of theirs is revoked" : ""}. They can log in again.`),
      confirm: "Sign out everywhere",
      danger: true,
    });
    if (!yes) return;
    let revoked = 0;
    const ok = await busy(submit, errors, async () => {
      const res = await customers.signOutEverywhere({ customerId: c.id, revokeApiKeys });
      revoked = res.apiKeysRevoked;
    });
    if (ok) {
      announce(revokeApiKeys ? `Signed out everywhere; ${revoked} API ${revoked === 1 ? "key" : "keys"} revoked.` : "Signed out everywhere.");
      reload();
    }
  });
  return form;
}

/** The customer's saved cards; after a removal, read again. */
function savedCards(customerId: string, signal: AbortSignal): HTMLElement {
  const box = h("div");
  const load = () =>
    replace(
      box,
      loadBlock("saved cards", async () => {
        const res = await payments.listSavedPaymentMethods({ customerId }, { signal });
        return res.savedMethods.length
          ? table("Saved cards of this customer (renewals charge them)", savedMethodColumns(load), res.savedMethods)
          : empty("No saved card.");
      }),
    );
  load();
  return box;
}
