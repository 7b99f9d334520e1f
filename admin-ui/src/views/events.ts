import { events } from "../api";
import { h, replace } from "../dom";
import { dateTime, prettyJSON } from "../format";
import type { Event, Notification } from "../gen/billing/event/event_pb";
import type { RouteContext } from "../router";
import { choice, listScreen, textFilter, type ListScreen } from "../list";
import { ListEventsRequestAllowed, ListNotificationsRequestAllowed } from "../gen/billing/event/event_allowed";
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

const eventColumns = (reload: () => void): Column<Event>[] => [
  { header: "Event", cell: (e) => idLink(`events/${e.id}`, e.id) },
  { header: "Type", cell: (e) => e.eventType },
  { header: "Status", cell: (e) => badge(e.status) },
  { header: "Order", cell: (e) => idLink(`orders/${e.orderId}`, e.orderId) },
  { header: "Attempts", numeric: true, cell: (e) => `${e.attempts} / ${e.maxAttempts}` },
  { header: "Last error", cell: (e) => e.lastError || "—" },
  { header: "Created", cell: (e) => dateTime(e.createdAt) },
  { header: "Action", cell: (e) => (e.status === "failed" ? retryButton(e, reload) : null) },
];

export function eventsView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  const screen: ListScreen = listScreen(ctx, {
    title: "Events",
    what: "events",
    filters: {
      label: "Filter events",
      fields: [
        field("Status", choice(query, "status", ListEventsRequestAllowed.status)),
        field("Type", choice(query, "type", ListEventsRequestAllowed.eventType)),
        field("Order", textFilter(query, "order", { placeholder: "order UUID", size: 38 })),
      ],
    },
    load: async (q) => {
      const res = await events.listEvents(
        { pagination: q.pagination, status: q.get("status"), eventType: q.get("type"), orderId: q.get("order") },
        { signal },
      );
      return { rows: res.events, meta: res.meta };
    },
    caption: "Events",
    columns: eventColumns(() => screen.reload()),
    empty: (q) => (q.filtered ? "No events match these filters." : "No events yet."),
  });
  return screen.element;
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

export function notificationsView(ctx: RouteContext): HTMLElement {
  const { query, signal } = ctx;
  return listScreen(ctx, {
    title: "Notifications",
    what: "notifications",
    filters: {
      label: "Filter notifications",
      fields: [
        field("Status", choice(query, "status", ListNotificationsRequestAllowed.status)),
        field("Channel", choice(query, "channel", ListNotificationsRequestAllowed.channel)),
      ],
    },
    load: async (q) => {
      const res = await events.listNotifications({ pagination: q.pagination, status: q.get("status"), channel: q.get("channel") }, { signal });
      return { rows: res.notifications, meta: res.meta };
    },
    caption: "Notifications",
    columns: notificationColumns,
    empty: (q) => (q.filtered ? "No notifications match these filters." : "No notifications yet."),
  }).element;
}
