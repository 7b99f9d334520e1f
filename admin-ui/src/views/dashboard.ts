import { events, integration, paymentAdmin, payments } from "../api";
import { MoneyKey } from "../money_key";
import { h, replace, type Child } from "../dom";
import { age, dateTime, fromCents, money, percent, startOfToday } from "../format";
import type { GetPaymentStatsResponse } from "../gen/billing/payment/payment_admin_pb";
import type { PaymentRecord } from "../gen/billing/payment/payment_pb";
import type { RouteContext } from "../router";
import { alertSlot, announce, badge, busy, empty, idLink, link, loadBlock, pageTitle, table } from "../ui";
import { confirmReturn, toReturn } from "./payments";
import { recurringCard } from "./recurring";
import { trendsCard } from "./trends";

/** The dashboard's one "Money to return" block: how much captured money
 * (failed payments whose gateway took the money after all) waits to go
 * back per currency, how many payments and how long the oldest has waited,
 * and the queue itself, oldest first on the page of the newest twenty, each
 * returnable in one step — through its gateway or to the customer's
 * balance — after a confirmation. The summary comes with the Payments
 * card's figures (first) and is asked again after each return. */
function moneyToReturnQueue(signal: AbortSignal, firstStats: Promise<GetPaymentStatsResponse>): HTMLElement {
  const slot = h("div");
  const errors = alertSlot();
  let stats = firstStats;
  const load = () =>
    replace(
      slot,
      loadBlock("money to return", async () => {
        const [s, res] = await Promise.all([stats, payments.listPayments({ pagination: { page: 1, pageSize: 20 }, toReturn: true }, { signal })]);
        if (res.payments.length === 0) {
          return [moneyToReturnSummary(s), empty("No captured money waits to go back.")];
        }
        const back = (p: PaymentRecord, destination: "gateway" | "balance") => {
          const amount = money(fromCents(toReturn(p)), p.currency);
          const label = destination === "balance" ? `Credit ${amount} to balance` : `Return ${amount} through the gateway`;
          const button = h("button", { type: "button", class: destination === "balance" ? "primary" : "", "aria-label": `${label}: payment ${p.id}` },
            destination === "balance" ? "Credit to balance…" : "Return…");
          const key = new MoneyKey();
          button.addEventListener("click", async () => {
            const yes = await confirmReturn(p, toReturn(p), destination);
            if (!yes) return;
            let status = "";
            const ok = await busy(button, errors, async () => {
              const req = { paymentId: p.id, amount: "", reason: "captured money returned from the dashboard", destination };
              const res = await payments.refundPayment(req, key.options(req));
              status = res.refund?.status ?? "";
            });
            if (ok) {
              announce(
                destination === "balance"
                  ? `Credited ${amount} to the customer's balance.`
                  : status === "pending"
                    ? `Sent ${amount} back through the gateway; the refund is pending until its outcome is recorded on the payment's page.`
                    : `Returned ${amount} through the gateway.`,
              );
              stats = paymentAdmin.getPaymentStats({ since: startOfToday().toISOString() }, { signal });
              load();
            }
          });
          return button;
        };
        return [moneyToReturnSummary(s), table(
          "Money to return",
          [
            { header: "Payment", cell: (p) => idLink(`payments/${p.id}`, p.id) },
            { header: "To return", numeric: true, cell: (p) => money(fromCents(toReturn(p)), p.currency) },
            { header: "Captured", cell: (p) => dateTime(p.capturedAt) },
            { header: "Why it could not apply", cell: (p) => p.failureReason || "—" },
            { header: "Actions", cell: (p) => h("div", { class: "row-actions" }, back(p, "balance"), " ", back(p, "gateway")) },
          ],
          res.payments,
        )];
      }),
    );
  load();
  return h("div", null, errors, slot);
}

/** The money to return per currency, with how many payments and the
 * oldest's age; "none" when nothing waits. */
function moneyToReturnSummary(s: GetPaymentStatsResponse): HTMLElement {
  return h(
    "dl",
    { class: "stats" },
    stat(
      "Waiting to go back",
      s.toReturn.length ? s.toReturn.map((r) => money(r.amount, r.currency)).join(", ") : "none",
      "money-to-return",
      s.toReturn.length
        ? [moneyToReturnAge(s), link("payments?return=1", "Show money to return")]
        : h("small", null, "no captured money waits to go back"),
    ),
  );
}

function stat(label: string, value: string, testid: string, extra?: Child): HTMLElement {
  return h("div", { class: "stat" }, h("dt", null, label), h("dd", { "data-testid": testid }, value), extra ?? null);
}

/** Today's payments as the service counts them (PaymentAdminService.
 * GetPaymentStats): since the start of the admin's local day, whatever the
 * number of payments; and the refunds pending now, each waiting for an
 * admin to record its outcome on its payment's page, listed on the refunds
 * screen. */
function paymentFigures(s: GetPaymentStatsResponse): HTMLElement[] {
  const succeeded = s.success + s.refunded;
  return [
    h(
      "dl",
      { class: "stats" },
      stat("Payments today", String(s.total), "today-count", h("small", null, `since ${dateTime(s.since)}`)),
      stat("Success rate today", percent(s.successRate), "success-rate", h("small", null, `${succeeded} succeeded, ${s.failed} failed, ${s.pending} pending`)),
      stat("Pending now", String(s.pendingNow), "pending-count", link("payments?status=pending", "Show pending payments")),
      stat("Refunds pending", String(s.refundsPending), "refunds-pending", [
        pendingRefunds(s),
        link("refunds?status=pending", "Show pending refunds"),
      ]),
    ),
    s.succeeded.length
      ? table(
          "Succeeded today by currency",
          [
            { header: "Currency", cell: (c) => c.currency },
            { header: "Payments", numeric: true, cell: (c) => String(c.payments) },
            { header: "Received", numeric: true, cell: (c) => h("span", { "data-testid": `received-${c.currency}` }, money(c.amount, c.currency)) },
            { header: "Refunded", numeric: true, cell: (c) => money(c.refundedAmount, c.currency) },
          ],
          s.succeeded,
        )
      : empty("No payment has succeeded today."),
  ];
}

/** How many payments have captured money to return and how long the oldest
 * has waited, by the service's clock (asOf), each in an element of its own
 * (the browser test reads them). */
function moneyToReturnAge(s: GetPaymentStatsResponse): HTMLElement {
  const oldest = s.toReturn.reduce((a, r) => (r.oldestCapturedAt < a ? r.oldestCapturedAt : a), s.toReturn[0]!.oldestCapturedAt);
  return h(
    "small",
    null,
    h("span", { "data-testid": "money-to-return-count" }, String(s.toReturn.reduce((n, r) => n + r.payments, 0n))),
    " payment(s) whose order could no longer take the money; oldest captured ",
    h("span", { "data-testid": "money-to-return-oldest", title: `captured ${dateTime(oldest)}` }, age(oldest, s.asOf)),
    " ago",
  );
}

/** How long the oldest pending refund has waited, by the service's clock
 * (asOf), so a browser whose clock is off tells the same age. */
function pendingRefunds(s: GetPaymentStatsResponse): HTMLElement {
  if (s.refundsPending === 0n || !s.oldestPendingRefundAt) {
    return h("small", { "data-testid": "oldest-pending-refund" }, "none waiting for an admin");
  }
  return h(
    "small",
    { "data-testid": "oldest-pending-refund", title: `requested ${dateTime(s.oldestPendingRefundAt)}` },
    `oldest waiting ${age(s.oldestPendingRefundAt, s.asOf)}: record each outcome on its payment's page`,
  );
}

export function dashboardView({ signal }: RouteContext): HTMLElement {
  const stats = paymentAdmin.getPaymentStats({ since: startOfToday().toISOString() }, { signal });
  // The money-to-return block reports its own failure; this one is not
  // left unhandled meanwhile.
  stats.catch(() => undefined);
  const today = loadBlock("today's payments", async () => paymentFigures(await stats));
  return h(
    "section",
    null,
    pageTitle("Dashboard"),
    h(
      "div",
      { class: "cards" },
      h("section", { class: "card", "aria-labelledby": "dash-payments" }, h("h2", { id: "dash-payments" }, "Payments"), today),
      trendsCard(signal),
      recurringCard(signal),
      h(
        "section",
        { class: "card card-wide", "aria-labelledby": "dash-to-return" },
        h("h2", { id: "dash-to-return" }, "Money to return"),
        moneyToReturnQueue(signal, stats),
      ),
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
        // Five columns of nodes: the whole row, so no cell has to wrap.
        { class: "card card-wide", "aria-labelledby": "dash-cluster" },
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
