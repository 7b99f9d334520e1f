import { events } from "../api";
import { h, replace } from "../dom";
import { dateTime, prettyJSON } from "../format";
import type { Event, Notification } from "../gen/billing/event/event_pb";
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

const eventStatuses = ["pending", "processing", "done", "failed"] as const;
const eventTypes = ["order_paid", "order_provisioned", "order_cancelled"] as const;
const notificationStatuses = ["pending", "sent", "failed"] as const;
const channels = ["webhook", "email"] as const;

function pageOf(q: URLSearchParams): number {
  const n = Number.parseInt(q.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

function select(name: string, values: readonly string[], current: string | null): HTMLSelectElement {
  return h("select", { name }, h("option", { value: "" }, "Any"), values.map((v) => h("option", { value: v, selected: current === v }, v)));
}

/** RetryEvent, after a confirmation; calls done with the event after. */
function retryButton(e: Event, done: () => void): HTMLElement {
  const btn = h("button", { type: "button", "aria-label": `Retry event ${e.id.slice(0, 8)}`, title: `Retry event ${e.id}` }, "Retry");
  const errors = alertSlot();
  btn.addEventListener("click", async () => {
    const yes = await confirmDialog({
      title: "Retry this event?",
      body: h("p", null, `The ${e.eventType} event of order ${e.orderId.slice(0, 8)} goes back to pending with a new set of attempts. Its last error was: ${e.lastError || "none"}.`),
      confirm: "Retry event",
    });
    if (!yes) return;
    const ok = await busy(btn, errors, async () => {
      await events.retryEvent({ id: e.id });
    });
    if (ok) {
      announce("Event queued again.");
      done();
    }
  });
  return h("div", { class: "cell-action" }, btn, errors);
}

export function eventsView({ query, signal }: RouteContext): HTMLElement {
  const status = select("status", eventStatuses, query.get("status"));
  const type = select("type", eventTypes, query.get("type"));
  const order = h("input", { name: "order", value: query.get("order") ?? "", placeholder: "order UUID", spellcheck: "false", size: 38 });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter events" },
    field("Status", status),
    field("Type", type),
    field("Order", order),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ status: status.value, type: type.value, order: order.value.trim(), page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ status: undefined, type: undefined, order: undefined, page: undefined });
  });

  const list = h("div");
  const load = () =>
    replace(
      list,
      loadBlock("events", async () => {
        const res = await events.listEvents(
          {
            pagination: { page: pageOf(query), pageSize: 20 },
            status: query.get("status") || undefined,
            eventType: query.get("type") || undefined,
            orderId: query.get("order") || undefined,
          },
          { signal },
        );
        if (res.events.length === 0) {
          return empty(query.toString() ? "No events match these filters." : "No events yet.");
        }
        const columns: Column<Event>[] = [
          { header: "Event", cell: (e) => idLink(`events/${e.id}`, e.id) },
          { header: "Type", cell: (e) => e.eventType },
          { header: "Status", cell: (e) => badge(e.status) },
          { header: "Order", cell: (e) => idLink(`orders/${e.orderId}`, e.orderId) },
          { header: "Attempts", numeric: true, cell: (e) => `${e.attempts} / ${e.maxAttempts}` },
          { header: "Last error", cell: (e) => e.lastError || "—" },
          { header: "Created", cell: (e) => dateTime(e.createdAt) },
          { header: "Action", cell: (e) => (e.status === "failed" ? retryButton(e, load) : null) },
        ];
        return [table("Events", columns, res.events), pager(res.meta, (p) => setQuery({ page: String(p) }))];
      }),
    );
  load();
  return h("section", null, pageTitle("Events"), form, list);
}

export function eventDetailView({ params, signal }: RouteContext): HTMLElement {
  const id = params.id!;
  const body = h("div");
  const load = () =>
    replace(
      body,
      loadBlock("event", async () => {
        const { event } = await events.getEvent({ id }, { signal });
        const e = event!;
        return h(
          "div",
          { class: "detail" },
          h(
            "section",
            { class: "card", "aria-labelledby": "event-facts" },
            h("h2", { id: "event-facts" }, "Details"),
            facts([
              ["Type", e.eventType],
              ["Status", badge(e.status)],
              ["Order", link(`orders/${e.orderId}`, h("code", null, e.orderId))],
              ["Attempts", `${e.attempts} of ${e.maxAttempts}`],
              ["Due", dateTime(e.runAt)],
              ["Claimed by", e.lockedBy ? `${e.lockedBy} until ${dateTime(e.lockedUntil)}` : ""],
              ["Last error", e.lastError],
              ["Created", dateTime(e.createdAt)],
              ["Updated", dateTime(e.updatedAt)],
            ]),
            e.status === "failed" ? retryButton(e, load) : null,
          ),
          h("section", { class: "card", "aria-labelledby": "event-payload" }, h("h2", { id: "event-payload" }, "Payload"), h("pre", { class: "json" }, prettyJSON(e.payload))),
          h(
            "section",
            { class: "card", "aria-labelledby": "event-notifications" },
            h("h2", { id: "event-notifications" }, "Notifications"),
            loadBlock("notifications", async () => {
              const res = await events.listNotifications({ pagination: { page: 1, pageSize: 50 }, eventId: e.id }, { signal });
              return res.notifications.length ? table("Notifications of this event", notificationColumns, res.notifications) : empty("This event queued no notification.");
            }),
          ),
        );
      }),
    );
  load();
  return h("section", null, pageTitle("Event", h("p", { class: "subtitle" }, h("code", null, id))), body);
}

const notificationColumns: Column<Notification>[] = [
  { header: "Recipient", cell: (n) => n.recipient },
  { header: "Channel", cell: (n) => n.channel },
  { header: "Subject", cell: (n) => n.subject || "—" },
  { header: "Status", cell: (n) => badge(n.status) },
  { header: "Attempts", numeric: true, cell: (n) => n.attempts },
  { header: "Last error", cell: (n) => n.lastError || "—" },
  { header: "Event", cell: (n) => (n.eventId ? idLink(`events/${n.eventId}`, n.eventId) : "—") },
  { header: "Sent", cell: (n) => dateTime(n.sentAt) },
  { header: "Created", cell: (n) => dateTime(n.createdAt) },
];

export function notificationsView({ query, signal }: RouteContext): HTMLElement {
  const status = select("status", notificationStatuses, query.get("status"));
  const channel = select("channel", channels, query.get("channel"));
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter notifications" },
    field("Status", status),
    field("Channel", channel),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ status: status.value, channel: channel.value, page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ status: undefined, channel: undefined, page: undefined });
  });
  const list = loadBlock("notifications", async () => {
    const res = await events.listNotifications(
      { pagination: { page: pageOf(query), pageSize: 20 }, status: query.get("status") || undefined, channel: query.get("channel") || undefined },
      { signal },
    );
    if (res.notifications.length === 0) {
      return empty(query.toString() ? "No notifications match these filters." : "No notifications yet.");
    }
    return [table("Notifications", notificationColumns, res.notifications), pager(res.meta, (p) => setQuery({ page: String(p) }))];
  });
  return h("section", null, pageTitle("Notifications"), form, list);
}
