import { events, integration, payments } from "../api";
import { h } from "../dom";
import { rate, startOfToday } from "../format";
import type { RouteContext } from "../router";
import { dateTime } from "../format";
import { badge, empty, link, loadBlock, pageTitle, table } from "../ui";

/** Payments are listed newest first; today's are read page by page until one
 * older than today appears, up to this many pages (then the count reads "N+"). */
const maxPages = 10;
const pageSize = 100;

export interface TodayStats {
  total: number;
  success: number;
  failed: number;
  pending: number;
  truncated: boolean;
}

export async function todayStats(signal: AbortSignal, now: Date = new Date()): Promise<TodayStats> {
  const since = startOfToday(now).getTime();
  const s: TodayStats = { total: 0, success: 0, failed: 0, pending: 0, truncated: false };
  for (let page = 1; page <= maxPages; page++) {
    const res = await payments.listPayments({ pagination: { page, pageSize } }, { signal });
    for (const p of res.payments) {
      if (new Date(p.createdAt).getTime() < since) {
        return s;
      }
      s.total++;
      if (p.status === "success" || p.status === "refunded") s.success++;
      else if (p.status === "failed") s.failed++;
      else if (p.status === "pending") s.pending++;
    }
    if (page >= (res.meta?.totalPages ?? 0)) {
      return s;
    }
  }
  s.truncated = true;
  return s;
}

function stat(label: string, value: string, testid: string, extra?: Node | null): HTMLElement {
  return h("div", { class: "stat" }, h("dt", null, label), h("dd", { "data-testid": testid }, value), extra ?? null);
}

export function dashboardView({ signal }: RouteContext): HTMLElement {
  const today = loadBlock("today's payments", async () => {
    const s = await todayStats(signal);
    const decided = s.success + s.failed;
    return h(
      "dl",
      { class: "stats" },
      stat("Payments today", `${s.total}${s.truncated ? "+" : ""}`, "today-count"),
      stat("Success rate today", rate(s.success, decided), "success-rate", h("small", null, `${s.success} succeeded, ${s.failed} failed`)),
    );
  });
  const pending = loadBlock("pending payments", async () => {
    const res = await payments.listPayments({ pagination: { page: 1, pageSize: 1 }, status: "pending" }, { signal });
    return h(
      "dl",
      { class: "stats" },
      stat("Pending payments", String(res.meta?.total ?? 0n), "pending-count", link("payments?status=pending", "Show pending payments")),
    );
  });
  return h(
    "section",
    null,
    pageTitle("Dashboard"),
    h(
      "div",
      { class: "cards" },
      h("section", { class: "card", "aria-labelledby": "dash-payments" }, h("h2", { id: "dash-payments" }, "Payments"), today, pending),
      h(
        "section",
        { class: "card", "aria-labelledby": "dash-events" },
        h("h2", { id: "dash-events" }, "Events"),
        loadBlock("failed events", async () => {
          const res = await events.listEvents({ pagination: { page: 1, pageSize: 1 }, status: "failed" }, { signal });
          return h(
            "dl",
            { class: "stats" },
            stat("Failed events", String(res.meta?.total ?? 0n), "failed-events", link("events?status=failed", "Show failed events")),
          );
        }),
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "dash-breakers" },
        h("h2", { id: "dash-breakers" }, "Downstream hosts"),
        loadBlock("circuit breakers", async () => {
          const { circuitBreakers } = await integration.listCircuitBreakers({}, { signal });
          if (circuitBreakers.length === 0) {
            return empty("This instance has called no gateway, provider or webhook yet.");
          }
          return table(
            "Circuit breakers of this instance",
            [
              { header: "Host", cell: (b) => h("code", null, b.host) },
              { header: "State", cell: (b) => badge(b.state) },
              { header: "Recent failures", numeric: true, cell: (b) => b.recentFailures },
              { header: "Opened", cell: (b) => dateTime(b.openedAt) },
            ],
            circuitBreakers,
          );
        }),
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "dash-cluster" },
        h("h2", { id: "dash-cluster" }, "Cluster"),
        h("h3", null, "Nodes"),
        loadBlock("cluster nodes", async () => {
          const { nodes } = await events.listNodes({}, { signal });
          return nodes.length
            ? table(
                "Nodes",
                [
                  { header: "Node", cell: (n) => h("code", null, n.id) },
                  { header: "State", cell: (n) => badge(n.lost ? "lost" : "alive") },
                  { header: "Version", cell: (n) => n.version || "—" },
                  { header: "Last heartbeat", numeric: true, cell: (n) => `${Math.round(n.heartbeatAgeSeconds)} s ago` },
                  { header: "Started", cell: (n) => dateTime(n.startedAt) },
                ],
                nodes,
              )
            : empty("No node has sent a heartbeat yet.");
        }),
        h("h3", null, "Leaders"),
        loadBlock("leader roles", async () => {
          const { leaders } = await events.listLeaders({}, { signal });
          return leaders.length
            ? table(
                "Leader roles",
                [
                  { header: "Role", cell: (l) => l.role },
                  { header: "Holder", cell: (l) => h("code", null, l.holder) },
                  { header: "Lease", cell: (l) => badge(l.valid ? "valid" : "expired") },
                  { header: "Expires", cell: (l) => dateTime(l.expiresAt) },
                ],
                leaders,
              )
            : empty("No leader role is held.");
        }),
      ),
    ),
  );
}
