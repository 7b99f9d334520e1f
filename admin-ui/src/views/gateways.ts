import { gateways, identity, payments } from "../api";
import { h, replace } from "../dom";
import { dateTime } from "../format";
import type { GatewayInterface } from "../gen/billing/gateway/gateway_pb";
import { navigate, type RouteContext } from "../router";
import { choice, listScreen, textFilter } from "../list";
import { FieldError, schemaForm } from "../schema_form";
import {
  alertSlot,
  announce,
  badge,
  busy,
  confirmDialog,
  empty,
  facts,
  field,
  link,
  loadBlock,
  pageTitle,
  table,
  type Column,
} from "../ui";
import { forgetInterfaceNames, interfaceNames, paymentColumns } from "./payments";
import { adminPageBlock } from "./plugins";

const columns: Column<GatewayInterface>[] = [
  { header: "Interface", cell: (g) => link(`gateways/${g.id}`, g.displayName || g.id) },
  { header: "Plugin", cell: (g) => link(`plugins/${encodeURIComponent(g.pluginName)}`, g.pluginName) },
  { header: "Plugin status", cell: (g) => [badge(g.pluginStatus), g.pluginEnabled ? null : [" ", badge("disabled")]] },
  { header: "Enabled", cell: (g) => badge(g.enabled ? "enabled" : "disabled") },
  { header: "Id", cell: (g) => h("code", { title: g.id }, g.id.slice(0, 8)) },
  { header: "Updated", cell: (g) => dateTime(g.updatedAt) },
];

export function gatewaysView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Gateway interfaces",
    what: "gateway interfaces",
    filters: {
      label: "Filter gateway interfaces",
      fields: [
        field("Plugin", textFilter(query, "plugin", { maxlength: 100, size: 20, spellcheck: null })),
        field("Enabled", choice(query, "enabled", ["true", "false"], (v) => (v === "true" ? "enabled" : "disabled"))),
      ],
    },
    below: createBlock(signal),
    load: async (q) => {
      const en = q.get("enabled");
      const res = await gateways.listGatewayInterfaces(
        { pagination: q.pagination, pluginName: q.get("plugin"), enabled: en === "true" ? true : en === "false" ? false : undefined },
        { signal },
      );
      return { rows: res.gatewayInterfaces, meta: res.meta };
    },
    caption: "Gateway interfaces",
    columns,
    empty: (q) => (q.filtered ? "No gateway interfaces match these filters." : "No gateway interfaces yet: create one below."),
  }).element;
}

/** The service's currencies ([billing].currencies), which a gateway
 * config's list of currencies offers. */
async function serviceCurrencies(signal: AbortSignal): Promise<string[]> {
  return (await identity.getMe({}, { signal })).currencies;
}

/** A new interface: pick a gateway plugin, name it, fill its config form. */
function createBlock(signal: AbortSignal): HTMLElement {
  const box = h("section", { class: "card create", "aria-labelledby": "new-interface" }, h("h2", { id: "new-interface" }, "New gateway interface"));
  box.append(
    loadBlock("gateway plugins", async () => {
      const [{ plugins }, currencies] = await Promise.all([gateways.listPlugins({ type: "gateway" }, { signal }), serviceCurrencies(signal)]);
      const usable = plugins.filter((p) => p.status === "loaded");
      if (usable.length === 0) {
        return empty("No loaded gateway plugin: put one in the plugin directory and reload plugins.");
      }
      const pluginSel = h(
        "select",
        { name: "plugin", required: true },
        usable.map((p) => h("option", { value: p.name }, `${p.name} ${p.version}`)),
      );
      const name = h("input", { name: "display_name", required: true, maxlength: 200, size: 30 });
      const cfgSlot = h("div");
      let cfg = schemaForm(usable[0]!.configSchema, undefined, { currencies });
      replace(cfgSlot, cfg.element);
      pluginSel.addEventListener("change", () => {
        const p = usable.find((x) => x.name === pluginSel.value);
        cfg = schemaForm(p?.configSchema, undefined, { currencies });
        replace(cfgSlot, cfg.element);
      });
      const submit = h("button", { type: "submit", class: "primary" }, "Create interface");
      const errors = alertSlot();
      const form = h("form", { class: "action-form", "aria-label": "New gateway interface" }, field("Plugin", pluginSel), field("Display name", name, "Shown to customers."), cfgSlot, errors, submit);
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        if (!name.value.trim()) {
          replace(errors, h("div", { class: "error", role: "alert" }, "Display name: is required."));
          name.focus();
          return;
        }
        let config;
        try {
          config = cfg.value();
        } catch (err) {
          if (err instanceof FieldError) {
            replace(errors, h("div", { class: "error", role: "alert" }, err.message));
            return;
          }
          throw err;
        }
        let createdId = "";
        const ok = await busy(submit, errors, async () => {
          const res = await gateways.createGatewayInterface({ pluginName: pluginSel.value, displayName: name.value.trim(), config });
          createdId = res.gatewayInterface?.id ?? "";
        });
        if (ok) {
          forgetInterfaceNames();
          announce("Gateway interface created (disabled).");
          navigate(`gateways/${createdId}`);
        }
      });
      return form;
    }),
  );
  return box;
}

/** The interface's callback URL with a copy button: what Stripe's webhook
 * endpoint and Alipay's notify address must be set to, exactly the URL its
 * payments give the gateway. */
function callbackURL(g: GatewayInterface): HTMLElement {
  const url = h("code", { "data-testid": "callback-url" }, g.callbackUrl);
  const copy = h("button", { type: "button", "aria-label": "Copy the callback URL" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(g.callbackUrl);
      announce("Callback URL copied.");
    } catch {
      // No clipboard (a page over plain HTTP on another host): select the
      // text for the admin to copy.
      const range = document.createRange();
      range.selectNodeContents(url);
      const sel = window.getSelection();
      sel?.removeAllRanges();
      sel?.addRange(range);
      announce("The browser refused the clipboard: the URL is selected, copy it with Ctrl+C.");
    }
  });
  return h(
    "div",
    { class: "callback-url" },
    url,
    " ",
    copy,
    h("p", { class: "hint" }, "Where the gateway sends its notifications. Stripe (webhook endpoint) and Alipay (notify address) need it entered in their dashboards."),
  );
}

export function gatewayDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("gateway interface", async () => {
        const [{ gatewayInterface }, currencies] = await Promise.all([gateways.getGatewayInterface({ id }, { signal }), serviceCurrencies(signal)]);
        const g = gatewayInterface!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "gi-facts" },
            h("h2", { id: "gi-facts" }, "Details"),
            facts([
              ["Display name", g.displayName],
              ["Plugin", link(`plugins/${encodeURIComponent(g.pluginName)}`, g.pluginName)],
              ["Plugin status", badge(g.pluginStatus)],
              ["Plugin enabled", h("span", { "data-testid": "interface-plugin-enabled" }, badge(g.pluginEnabled ? "enabled" : "disabled"))],
              ["Enabled", h("span", { "data-testid": "interface-enabled" }, badge(g.enabled ? "enabled" : "disabled"))],
              ["Callback URL", callbackURL(g)],
              ["Created", dateTime(g.createdAt)],
              ["Updated", dateTime(g.updatedAt)],
            ]),
            g.pluginEnabled
              ? null
              : h(
                  "p",
                  { class: "notice", role: "note" },
                  "Its plugin is disabled: customers cannot start payments through this interface until the plugin is enabled again. Payments already made through it still settle and refund.",
                ),
            h("div", { class: "inline-actions" }, enableButton(g, load), testButton(g)),
          ),
          editBlock(g, currencies, load),
          h(
            "section",
            { class: "card", "aria-labelledby": "gi-admin-page" },
            h("h2", { id: "gi-admin-page" }, "Plugin page"),
            loadBlock("plugin", async () => {
              const { plugin } = await gateways.getPlugin({ name: g.pluginName }, { signal });
              return plugin?.hasAdminPage ? adminPageBlock(g.pluginName, signal, g.id) : empty("This plugin has no admin_page().");
            }),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "gi-payments" },
            h("h2", { id: "gi-payments" }, "Recent payments"),
            loadBlock("payments", async () => {
              const res = await payments.listPayments({ pagination: { page: 1, pageSize: 20 }, gatewayInterfaceId: g.id }, { signal });
              return res.payments.length
                ? [table("Recent payments through this interface", paymentColumns(await interfaceNames()), res.payments), link(`payments?interface=${g.id}`, "All payments through this interface")]
                : empty("No payments through this interface yet.");
            }),
          ),
        );
      }),
    );
  load();
  return h("section", null, pageTitle("Gateway interface", h("p", { class: "subtitle" }, h("code", null, id))), body);
}

function enableButton(g: GatewayInterface, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: g.enabled ? "danger" : "primary" }, g.enabled ? "Disable…" : "Enable");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    if (g.enabled) {
      const yes = await confirmDialog({
        title: "Disable this interface?",
        body: h("p", null, `Customers can no longer start payments through ${g.displayName}. Pending payments are not affected.`),
        confirm: "Disable",
        danger: true,
      });
      if (!yes) return;
    }
    const ok = await busy(btn, errors, async () => {
      if (g.enabled) await gateways.disableGatewayInterface({ id: g.id });
      else await gateways.enableGatewayInterface({ id: g.id });
    });
    if (ok) {
      announce(g.enabled ? "Interface disabled." : "Interface enabled.");
      reload();
    }
  });
  return h("div", null, btn, errors);
}

function testButton(g: GatewayInterface): HTMLElement {
  const btn = h("button", { type: "button" }, "Test configuration");
  const result = h("div", { role: "status" });
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    replace(result);
    await busy(btn, errors, async () => {
      const res = await gateways.testGatewayInterface({ id: g.id });
      replace(result, h("p", { class: res.ok ? "notice" : "error" }, res.ok ? "Test passed" : "Test failed", res.message ? `: ${res.message}` : "."));
    });
  });
  return h("div", null, btn, result, errors);
}

function editBlock(g: GatewayInterface, currencies: string[], reload: () => void): HTMLElement {
  const name = h("input", { name: "display_name", required: true, maxlength: 200, value: g.displayName, size: 30 });
  const cfg = schemaForm(g.configSchema, g.config ?? {}, { currencies });
  const submit = h("button", { type: "submit", class: "primary" }, "Save");
  const errors = alertSlot();
  const form = h("form", { class: "action-form", "aria-label": "Edit gateway interface" }, field("Display name", name), cfg.element, errors, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    let config;
    try {
      config = cfg.value();
    } catch (err) {
      if (err instanceof FieldError) {
        replace(errors, h("div", { class: "error", role: "alert" }, err.message));
        return;
      }
      throw err;
    }
    const ok = await busy(submit, errors, async () => {
      await gateways.updateGatewayInterface({ id: g.id, displayName: name.value.trim() || undefined, config });
    });
    if (ok) {
      forgetInterfaceNames();
      announce("Interface saved.");
      reload();
    }
  });
  return h("section", { class: "card", "aria-labelledby": "gi-edit" }, h("h2", { id: "gi-edit" }, "Settings"), form);
}
