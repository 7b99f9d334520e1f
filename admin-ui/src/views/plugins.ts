import { Code, ConnectError } from "@connectrpc/connect";

import { gateways } from "../api";
import { h, replace } from "../dom";
import { dateTime, prettyJSON } from "../format";
import type { Plugin, ReloadPluginsResponse } from "../gen/billing/gateway/gateway_pb";
import type { RouteContext } from "../router";
import { choice, listScreen } from "../list";
import { ListPluginsRequestAllowed } from "../gen/billing/gateway/gateway_allowed";
import { alertSlot, announce, badge, busy, confirmDialog, empty, facts, failure, field, link, loadBlock, pageTitle, table, type Column } from "../ui";

function versionText(p: Plugin): string {
  if (p.loadedVersion && p.loadedVersion !== p.version) {
    return `${p.version} (running ${p.loadedVersion})`;
  }
  return p.version || "0.0.0";
}

const columns: Column<Plugin>[] = [
  { header: "Plugin", cell: (p) => link(`plugins/${encodeURIComponent(p.name)}`, p.name) },
  { header: "Type", cell: (p) => p.type },
  { header: "Version", cell: versionText },
  { header: "Status", cell: (p) => badge(p.status) },
  { header: "Enabled", cell: (p) => badge(p.enabled ? "enabled" : "disabled") },
  { header: "Load error", cell: (p) => (p.lastError ? h("span", { class: "load-error" }, p.lastError) : "—") },
  { header: "Path", cell: (p) => h("code", null, p.path || "—") },
];

/** The plugins of the plugin directory (one page: a directory holds few),
 * filtered by type and status, and the button that scans it again. */
export function pluginsView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  const reload = h("button", { type: "button", class: "primary" }, "Reload plugins");
  const reloadResult = h("div");
  const errors = alertSlot();
  const screen = listScreen(ctx, {
    title: "Plugins",
    what: "plugins",
    top: [h("div", { class: "inline-actions" }, reload), errors, reloadResult],
    filters: {
      label: "Filter plugins",
      fields: [
        field("Type", choice(query, "type", ListPluginsRequestAllowed.type)),
        field("Status", choice(query, "status", ListPluginsRequestAllowed.status)),
      ],
    },
    load: async (q) => {
      const res = await gateways.listPlugins({ type: q.get("type"), status: q.get("status") }, { signal });
      return { rows: res.plugins };
    },
    caption: "Plugins",
    columns,
    empty: (q) => (q.filtered ? "No plugins match these filters." : "No plugins found in the plugin directory."),
  });
  reload.addEventListener("click", async () => {
    replace(reloadResult);
    await busy(reload, errors, async () => {
      const res = await gateways.reloadPlugins({});
      replace(reloadResult, reloadSummary(res));
      announce(`Scanned ${res.files} plugin files: ${res.changes.length} changed.`);
      screen.reload();
    });
  });
  return screen.element;
}

function reloadSummary(res: ReloadPluginsResponse): HTMLElement {
  return h(
    "section",
    { class: "card", "aria-label": "Reload result" },
    h("h2", null, `Reload: ${res.files} files, ${res.changes.length} changed`),
    res.changes.length
      ? table(
          "What the reload changed",
          [
            { header: "Plugin", cell: (c) => c.name },
            { header: "Change", cell: (c) => badge(c.change) },
            { header: "Version", cell: (c) => (c.previousVersion ? `${c.previousVersion} → ${c.fileVersion || "?"}` : c.fileVersion || "—") },
            { header: "Interfaces updated", numeric: true, cell: (c) => c.interfacesUpdated },
            { header: "Error", cell: (c) => c.error || "—" },
          ],
          res.changes,
        )
      : empty("Nothing changed."),
    res.warnings.length ? h("ul", { class: "warnings" }, res.warnings.map((w) => h("li", null, w))) : null,
  );
}

export function pluginDetailView({ params, signal }: RouteContext): HTMLElement {
  const name = params.name!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("plugin", async () => {
        const { plugin } = await gateways.getPlugin({ name }, { signal });
        const p = plugin!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "plugin-facts" },
            h("h2", { id: "plugin-facts" }, "Details"),
            facts([
              ["Type", p.type],
              ["Version", h("span", { "data-testid": "plugin-version" }, versionText(p))],
              ["Status", h("span", { "data-testid": "plugin-status" }, badge(p.status))],
              ["Load error", p.lastError ? h("pre", { class: "plugin-page" }, p.lastError) : ""],
              ["Enabled", h("span", { "data-testid": "plugin-enabled" }, badge(p.enabled ? "enabled" : "disabled"))],
              ["Path", h("code", null, p.path)],
              ["SHA-256", h("code", null, p.sha256)],
              ["Running SHA-256", p.loadedSha256 ? h("code", null, p.loadedSha256) : "not loaded"],
              ["First seen", dateTime(p.createdAt)],
              ["Updated", dateTime(p.updatedAt)],
            ]),
            enableBlock(p, load),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "plugin-info" },
            h("h2", { id: "plugin-info" }, "info()"),
            h("pre", { class: "json" }, JSON.stringify(p.info ?? {}, null, 2)),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "plugin-schema" },
            h("h2", { id: "plugin-schema" }, "Config schema"),
            h("pre", { class: "json" }, JSON.stringify(p.configSchema ?? {}, null, 2)),
          ),
          h(
            "section",
            { class: "card", "aria-labelledby": "plugin-page" },
            h("h2", { id: "plugin-page" }, "Plugin page"),
            p.hasAdminPage ? adminPageBlock(p.name, signal) : empty("This plugin has no admin_page()."),
          ),
        );
      }),
    );
  load();
  return h("section", null, pageTitle(`Plugin ${name}`), body);
}

/** EnablePlugin / DisablePlugin. Only gateway plugins can be disabled: a
 * disabled one takes no new payments but still settles and refunds the old
 * ones (docs/decisions.md). */
function enableBlock(p: Plugin, reload: () => void): HTMLElement | null {
  if (p.type !== "gateway" && p.enabled) {
    return h("p", { class: "hint" }, "Only gateway plugins can be disabled: a provider's products are disabled one by one, a notifier in [notify].");
  }
  const btn = h("button", { type: "button", class: p.enabled ? "danger" : "primary" }, p.enabled ? "Disable plugin…" : "Enable plugin");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    if (p.enabled) {
      const yes = await confirmDialog({
        title: `Disable plugin ${p.name}?`,
        body: h(
          "p",
          null,
          "Customers can no longer start payments through any interface of this plugin. Payments already made through it still settle (callbacks, status queries, bank-transfer confirmations) and can be refunded. The interfaces keep their own settings.",
        ),
        confirm: "Disable plugin",
        danger: true,
      });
      if (!yes) return;
    }
    const ok = await busy(btn, errors, async () => {
      if (p.enabled) await gateways.disablePlugin({ name: p.name });
      else await gateways.enablePlugin({ name: p.name });
    });
    if (ok) {
      announce(p.enabled ? `Plugin ${p.name} disabled.` : `Plugin ${p.name} enabled.`);
      reload();
    }
  });
  return h("div", { class: "inline-actions" }, btn, errors);
}

/** The plugin's admin_page() output, shown as text: it is never parsed as
 * HTML, so a plugin cannot put markup or script into the console. */
export function adminPageBlock(plugin: string, signal: AbortSignal, interfaceId?: string): HTMLElement {
  const box = h("div", { class: "async" }, h("p", { class: "loading", role: "status" }, "Loading the plugin page…"));
  gateways
    .getPluginAdminPage({ name: plugin, gatewayInterfaceId: interfaceId }, { signal })
    .then((res) => {
      replace(box, res.content ? h("pre", { class: "plugin-page", "data-testid": "plugin-page" }, prettyJSON(res.content)) : empty("The plugin page is empty."));
    })
    .catch((err: unknown) => {
      const ce = ConnectError.from(err);
      if (ce.code === Code.Canceled) return;
      replace(box, ce.code === Code.NotFound ? empty("This plugin has no admin_page().") : failure("Plugin page", err));
    });
  return box;
}
