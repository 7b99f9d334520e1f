import { paymentAdmin } from "../api";
import { changeTable } from "../audit_change";
import { h, type Child } from "../dom";
import { dateTime, shortId } from "../format";
import type { AuditEntry } from "../gen/billing/payment/payment_admin_pb";
import { setQuery, type RouteContext } from "../router";
import { empty, field, link, loadBlock, pager, pageTitle, table, type Column } from "../ui";

/** The kinds of entity the service writes audit entries about. */
export const auditEntityTypes = [
  "payment",
  "refund",
  "order",
  "invoice",
  "customer",
  "balance_transaction",
  "gateway_interface",
  "plugin",
  "product",
  "admin_api_key",
  "event",
] as const;

export const actorKinds = ["admin", "customer", "api_key", "gateway", "system"] as const;

/** The audit view's address for one entity's entries (the payment, order
 * and customer pages link here). */
export function auditHref(entityType: string, entityId: string): string {
  return `audit?${new URLSearchParams({ entity_type: entityType, entity_id: entityId }).toString()}`;
}

/** A link to the audit view filtered to one entity. */
export function auditLink(entityType: string, entityId: string, text = "Audit log"): HTMLAnchorElement {
  return link(auditHref(entityType, entityId), text, { "data-testid": "audit-link" });
}

/** The console's page of an entity, where it has one. */
function entityLink(a: AuditEntry): Child {
  const id = h("code", { title: a.entityId }, shortId(a.entityId));
  const page: Record<string, string> = { payment: "payments", order: "orders", customer: "customers", gateway_interface: "gateways", plugin: "plugins", event: "events" };
  const to = page[a.entityType];
  return [a.entityType, " ", to ? link(`${to}/${a.entityId}`, id, { "aria-label": `${a.entityType} ${a.entityId}` }) : id];
}

function actorCell(a: AuditEntry): Child {
  if (!a.actorId) return a.actorKind;
  const id = h("code", { title: a.actorId }, shortId(a.actorId));
  return [a.actorKind, " ", a.actorKind === "customer" ? link(`customers/${a.actorId}`, id, { "aria-label": `customer ${a.actorId}` }) : id];
}

export const auditColumns: Column<AuditEntry>[] = [
  { header: "Time", cell: (a) => dateTime(a.createdAt) },
  { header: "Action", cell: (a) => h("code", null, a.action) },
  { header: "Entity", cell: entityLink },
  { header: "Actor", cell: actorCell },
  { header: "Before → after", cell: (a) => changeTable(a.before, a.after, `What ${a.action} changed`) },
];

function pageOf(q: URLSearchParams): number {
  const n = Number.parseInt(q.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

function select(name: string, current: string, values: readonly string[]): HTMLSelectElement {
  return h(
    "select",
    { name },
    h("option", { value: "" }, "Any"),
    values.map((v) => h("option", { value: v, selected: current === v }, v)),
    current && !values.includes(current) ? h("option", { value: current, selected: true }, current) : null,
  );
}

/** Every audit entry, newest first, filtered by entity (kind and id), actor
 * (kind and id) and action (PaymentAdminService.ListAuditEntries); each
 * change shows the entity's fields before and after side by side, money
 * first. The filters live in the URL. */
export function auditView({ query, signal }: RouteContext): HTMLElement {
  const q = (k: string) => query.get(k) ?? "";
  const entityType = select("entity_type", q("entity_type"), auditEntityTypes);
  const entityId = h("input", { name: "entity_id", value: q("entity_id"), placeholder: "UUID or name", spellcheck: "false", size: 38 });
  const actorKind = select("actor_kind", q("actor_kind"), actorKinds);
  const actorId = h("input", { name: "actor_id", value: q("actor_id"), placeholder: "UUID or node id", spellcheck: "false", size: 38 });
  const action = h("input", { name: "action", value: q("action"), placeholder: "e.g. payment.refund", spellcheck: "false", size: 22 });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter the audit log" },
    field("Entity", entityType),
    field("Entity id", entityId),
    field("Actor", actorKind),
    field("Actor id", actorId),
    field("Action", action),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  const keys = ["entity_type", "entity_id", "actor_kind", "actor_id", "action"] as const;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({
      entity_type: entityType.value,
      entity_id: entityId.value.trim(),
      actor_kind: actorKind.value,
      actor_id: actorId.value.trim(),
      action: action.value.trim(),
      page: undefined,
    });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ ...Object.fromEntries(keys.map((k) => [k, undefined])), page: undefined });
  });

  const list = loadBlock("audit log", async () => {
    const res = await paymentAdmin.listAuditEntries(
      {
        entityType: q("entity_type"),
        entityId: q("entity_id"),
        actorKind: q("actor_kind"),
        actorId: q("actor_id"),
        action: q("action"),
        pagination: { page: pageOf(query), pageSize: 20 },
      },
      { signal },
    );
    if (res.entries.length === 0) {
      return empty(keys.some((k) => q(k)) ? "No audit entry matches these filters." : "The audit log is empty.");
    }
    return [table("Audit log", auditColumns, res.entries), pager(res.meta, (p) => setQuery({ page: String(p) }))];
  });
  return h(
    "section",
    null,
    pageTitle(
      "Audit log",
      h("p", { class: "subtitle" }, "Who changed what, newest first. Each change shows the fields it changed, before and after; money fields come first."),
    ),
    form,
    list,
  );
}
