import { orders } from "../api";
import { h, replace } from "../dom";
import { dateTime, fromCents, money, toCents } from "../format";
import type { Product } from "../gen/billing/order/order_pb";
import { CreateProductRequestAllowed } from "../gen/billing/order/order_allowed";
import type { RouteContext } from "../router";
import { listScreen } from "../list";
import { alertSlot, announce, busy, field, type Column } from "../ui";

/** A billing cycle as a reader says it: "semi-annual", "one-time"; a
 * record of a server older than cycles has none and is one-time. */
export function cycleLabel(cycle: string): string {
  return (cycle || "one_time").replace("_", "-");
}

/** A select of the billing cycles the API allows, current selected. */
function cycleSelect(current: string): HTMLSelectElement {
  return h(
    "select",
    { name: "billing_cycle" },
    CreateProductRequestAllowed.billingCycle.map((c) => h("option", { value: c, selected: c === (current || "one_time") }, cycleLabel(c))),
  );
}

/** The catalogue: every product with its price per billing cycle, a form
 * to add one, and a form to change one's price and cycle. */
export function productsView(ctx: RouteContext): HTMLElement {
  const editSlot = h("div");
  const reload = () => screen.reload();
  const columns: Column<Product>[] = [
    { header: "Name", cell: (p) => p.name },
    { header: "Price", numeric: true, cell: (p) => money(p.price, p.currency) },
    { header: "Billing cycle", cell: (p) => cycleLabel(p.billingCycle) },
    { header: "Enabled", cell: (p) => (p.enabled ? "yes" : "no") },
    { header: "Created", cell: (p) => dateTime(p.createdAt) },
    {
      header: "Change",
      cell: (p) => {
        const btn = h("button", { type: "button", "aria-label": `Change ${p.name}` }, "Change…");
        btn.addEventListener("click", () => {
          replace(editSlot, editForm(p, reload));
          editSlot.querySelector("input")?.focus();
        });
        return btn;
      },
    },
  ];
  const screen = listScreen(ctx, {
    title: "Products",
    what: "products",
    top: createForm(reload),
    aboveList: editSlot,
    load: async (q) => {
      const res = await orders.listProducts({ pagination: q.pagination }, { signal: ctx.signal });
      return { rows: res.products, meta: res.meta };
    },
    caption: "Products",
    columns,
    empty: () => "No products yet.",
  });
  return screen.element;
}

/** Submits a product form: checks its price (an error in errors when it
 * is not an amount of at least 0), then sends it with call, the button busy,
 * and announces done once it went through. */
function onSubmit(form: HTMLFormElement, price: HTMLInputElement, submit: HTMLButtonElement, errors: HTMLElement, call: (price: string) => Promise<unknown>, done: () => void): void {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const cents = toCents(price.value);
    if (cents === null || cents < 0n) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter a price of at least 0, such as 12 or 12.30."));
      price.focus();
      return;
    }
    if (await busy(submit, errors, async () => void (await call(fromCents(cents))))) done();
  });
}

function createForm(reload: () => void): HTMLElement {
  const name = h("input", { name: "name", required: true, maxlength: 200, size: 30, autocomplete: "off" });
  const price = h("input", { name: "price", inputmode: "decimal", autocomplete: "off", required: true, size: 12 });
  const currency = h("input", { name: "currency", required: true, pattern: "[A-Z]{3}", size: 5, placeholder: "CNY", autocomplete: "off" });
  const cycle = cycleSelect("");
  const submit = h("button", { type: "submit", class: "primary" }, "Add product");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Add a product" },
    h("h2", null, "Add a product"),
    field("Name", name),
    field("Price", price, "The price of one billing cycle."),
    field("Currency", currency, "One of [billing].currencies."),
    field("Billing cycle", cycle),
    errors,
    submit,
  );
  onSubmit(form, price, submit, errors, (amount) => orders.createProduct({ name: name.value, price: amount, currency: currency.value, billingCycle: cycle.value }), () => {
    announce("Product added.");
    form.reset();
    reload();
  });
  return form;
}

/** Changes p's price and billing cycle; existing orders follow only when
 * the box is ticked (docs/decisions.md, "billing cycles"). */
function editForm(p: Product, reload: () => void): HTMLElement {
  const price = h("input", { name: "price", inputmode: "decimal", autocomplete: "off", required: true, size: 12, value: p.price });
  const cycle = cycleSelect(p.billingCycle);
  const apply = h("input", { type: "checkbox", name: "apply_to_existing_orders" });
  const submit = h("button", { type: "submit" }, "Save");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": `Change ${p.name}` },
    h("h2", null, `Change ${p.name}`),
    field(`Price (${p.currency})`, price, "The price of one billing cycle."),
    field("Billing cycle", cycle),
    h("div", { class: "field checkbox" }, h("label", null, apply, " Also move the open orders of this product to this price and cycle, for their later periods")),
    errors,
    submit,
  );
  onSubmit(form, price, submit, errors, (amount) => orders.updateProduct({ id: p.id, price: amount, billingCycle: cycle.value, applyToExistingOrders: apply.checked }), () => {
    announce(`${p.name} changed.`);
    form.remove();
    reload();
  });
  return form;
}
