import { paymentAdmin } from "../api";
import { changeTable } from "../audit_change";
import { h, type Child } from "../dom";
import { dateTime, shortId } from "../format";
import type { AuditEntry } from "../gen/billing/payment/payment_admin_pb";
import type { RouteContext } from "../router";
import { checkFilter, choice, listScreen, textFilter } from "../list";
import { actorText, sessionActions } from "../audit_actor";
import { ListAuditEntriesRequestAllowed } from "../gen/billing/payment/payment_admin_allowed";
import { field, link, type Column } from "../ui";

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

/** Who acted, by name (the id in its title); a customer links to their
 * page. */
function actorCell(a: AuditEntry): Child {
  const text = actorText(a);
  if (a.actorKind === "customer" && a.actorId) {
    return link(`customers/${a.actorId}`, text, { title: a.actorId, "data-testid": "actor" });
  }
  return h("span", { title: a.actorId || null, "data-testid": "actor" }, text);
}

export const auditColumns: Column<AuditEntry>[] = [
  { header: "Time", cell: (a) => dateTime(a.createdAt) },
  { header: "Action", cell: (a) => h("code", null, a.action) },
  { header: "Entity", cell: entityLink },
  { header: "Actor", cell: actorCell },
  { header: "Before → after", cell: (a) => changeTable(a.before, a.after, `What ${a.action} changed`) },
];

/** Every audit entry, newest first, filtered by entity (kind and id), actor
 * (kind and id) and action, sign-ins hidden on request
 * (PaymentAdminService.ListAuditEntries); each
 * change shows the entity's fields before and after side by side, money
 * first. */
export function auditView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Audit log",
    intro: "Who changed what, newest first. Each change shows the fields it changed, before and after; money fields come first.",
    what: "audit log",
    filters: {
      label: "Filter the audit log",
      fields: [
        field("Entity", choice(query, "entity_type", auditEntityTypes)),
        field("Entity id", textFilter(query, "entity_id", { placeholder: "UUID or name", size: 38 })),
        field("Actor", choice(query, "actor_kind", ListAuditEntriesRequestAllowed.actorKind)),
        field("Actor id", textFilter(query, "actor_id", { placeholder: "UUID or node id", size: 38 })),
        field("Action", textFilter(query, "action", { placeholder: "e.g. payment.refund", size: 22 })),
        field("Hide sign-ins", checkFilter(query, "hide_logins"), `Leaves out ${sessionActions.join(" and ")}.`),
      ],
    },
    load: async (q) => {
      const res = await paymentAdmin.listAuditEntries(
        {
          entityType: q.get("entity_type"),
          entityId: q.get("entity_id"),
          actorKind: q.get("actor_kind"),
          actorId: q.get("actor_id"),
          action: q.get("action"),
          excludeActions: q.get("hide_logins") === "1" ? [...sessionActions] : [],
          pagination: q.pagination,
        },
        { signal },
      );
      return { rows: res.entries, meta: res.meta };
    },
    caption: "Audit log",
    columns: auditColumns,
    empty: (q) => (q.filtered ? "No audit entry matches these filters." : "The audit log is empty."),
  }).element;
}
