import { identity } from "../api";
import { h, replace } from "../dom";
import { dateTime } from "../format";
import type { AdminApiKey } from "../gen/billing/identity/identity_pb";
import type { RouteContext } from "../router";
import { listScreen, type ListScreen } from "../list";
import { CreateAdminApiKeyRequestAllowed } from "../gen/billing/identity/identity_allowed";
import { alertSlot, announce, badge, busy, confirmDialog, field, type Column } from "../ui";

/** What each scope lets a key do, as CreateAdminApiKey documents it; the
 * scopes themselves are the request's allowed values. */
const scopeText: Record<string, string> = {
  read: "read: lists, reads and figures",
  operate: "operate: read, and refunds, bank-transfer confirmations, event retries, resolving refunds",
  admin: "admin: everything but managing admins and keys",
};

/** The admins' API keys (IdentityService.CreateAdminApiKey, ListAdminApiKeys,
 * RevokeAdminApiKey): keys for buf curl and scripts, each acting as the admin
 * who created it within its scope. A new key is shown once, here. */
export function apiKeysView(ctx: RouteContext): HTMLElement {
  const shown = h("div");
  const reload = () => screen.reload();
  const screen: ListScreen = listScreen(ctx, {
    title: "API keys",
    intro: "Keys for buf curl and scripts, sent as x-api-key. Each acts as the admin who created it, within its scope; every audit row it writes names the key.",
    what: "API keys",
    top: h("div", { class: "card" }, createForm(shown, reload), shown),
    load: async (q) => {
      const res = await identity.listAdminApiKeys({ pagination: q.pagination }, { signal: ctx.signal });
      return { rows: res.apiKeys, meta: res.meta };
    },
    caption: "Admin API keys",
    columns: columns(reload),
    empty: () => "No admin API key yet.",
  });
  return screen.element;
}

/** A key that expires within this many days is marked on the list. */
const expirySoonDays = 14;

/** The key's expiry cell: "never", the time, marked when it is within
 * expirySoonDays or past. */
function expiryCell(k: AdminApiKey, now: number): HTMLElement | string {
  if (!k.expiresAt) return "never";
  const left = Date.parse(k.expiresAt) - now;
  if (k.revokedAt || left > expirySoonDays * 86_400_000) return dateTime(k.expiresAt);
  const note = left <= 0 ? "expired" : "expires soon";
  return h("span", { class: "expiry-soon", "data-testid": "key-expiry-soon", title: note }, dateTime(k.expiresAt), " ", h("strong", null, `(${note})`));
}

function columns(reload: () => void): Column<AdminApiKey>[] {
  const now = Date.now();
  return [
    { header: "Name", cell: (k) => k.name },
    { header: "Key", cell: (k) => h("code", null, `${k.prefix}_…`) },
    { header: "Scope", cell: (k) => k.scope },
    { header: "Acts as", cell: (k) => k.adminUsername || k.adminId },
    { header: "Created", cell: (k) => dateTime(k.createdAt) },
    { header: "Last used", cell: (k) => (k.lastUsedAt ? dateTime(k.lastUsedAt) : "never") },
    { header: "Expires", cell: (k) => expiryCell(k, now) },
    {
      header: "Status",
      cell: (k) =>
        k.revokedAt
          ? h("span", { title: `revoked ${dateTime(k.revokedAt)}` }, badge("revoked"))
          : k.expiresAt && Date.parse(k.expiresAt) <= now
            ? badge("expired")
            : badge("active"),
    },
    { header: "", cell: (k) => (k.revokedAt ? "" : revokeButton(k, reload)) },
  ];
}

function revokeButton(k: AdminApiKey, reload: () => void): HTMLElement {
  const btn = h("button", { type: "button", class: "danger", "aria-label": `Revoke ${k.name}` }, "Revoke…");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const yes = await confirmDialog({
      title: "Revoke this API key?",
      body: h("p", null, `“${k.name}” (${k.prefix}, scope ${k.scope}) is refused from its next request on. This cannot be undone.`),
      confirm: "Revoke key",
      danger: true,
    });
    if (!yes) return;
    const ok = await busy(btn, errors, async () => {
      await identity.revokeAdminApiKey({ id: k.id });
    });
    if (ok) {
      announce(`API key “${k.name}” revoked.`);
      reload();
    }
  });
  return h("div", null, btn, errors);
}

function createForm(shown: HTMLElement, reload: () => void): HTMLElement {
  const name = h("input", { name: "name", required: true, maxlength: 100, size: 30, autocomplete: "off" });
  const scope = h(
    "select",
    { name: "scope", required: true },
    h("option", { value: "" }, "Choose…"),
    CreateAdminApiKeyRequestAllowed.scope.map((value) => h("option", { value }, scopeText[value] ?? value)),
  );
  const expires = h("input", { name: "expires", type: "date" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create key");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Create an API key", novalidate: true },
    h("h2", null, "Create an API key"),
    field("Name", name, "What the key is for; shown in the list."),
    field("Scope", scope),
    field("Expires", expires, "Optional: the key stops working at the start of this day (UTC). The service may cap how far ahead."),
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    replace(shown);
    if (!name.value.trim()) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Name the key."));
      name.focus();
      return;
    }
    if (!scope.value) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Choose what the key may do."));
      scope.focus();
      return;
    }
    let key = "";
    const ok = await busy(submit, errors, async () => {
      const expiresAt = expires.value ? `${expires.value}T00:00:00Z` : "";
      const res = await identity.createAdminApiKey({ name: name.value.trim(), scope: scope.value, expiresAt });
      key = res.key;
    });
    if (!ok) return;
    const out = h("input", { readonly: true, value: key, size: 90, "aria-label": "The new key", "data-testid": "new-key", spellcheck: "false" });
    replace(
      shown,
      h(
        "div",
        { class: "notice", role: "status" },
        h("p", null, h("strong", null, "Copy the key now: it is not shown again."), " Send it as the x-api-key header."),
        out,
      ),
    );
    name.value = "";
    scope.value = "";
    expires.value = "";
    out.select();
    announce("API key created.");
    reload();
  });
  return form;
}
