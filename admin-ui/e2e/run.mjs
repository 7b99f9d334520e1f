// End-to-end test of the admin console: Debian's Chromium, driven by
// playwright-core, against a running paymentd. admin-ui/e2e_test.go starts
// the service on a fresh database, creates the world through the API (SQL
// only for a failed event, which no API makes on purpose), and runs this
// script with a fixture file:
//
//   node e2e/run.mjs fixture.json
//
// Every step must pass; there is no "skip". Besides each step's own checks,
// the run fails on:
//   - any response of the service's API (/billing.*) that is an error, unless
//     the step that caused it expected exactly that procedure and code (the
//     GetMe that finds no session before logging in, a wrong password);
//   - a "not available" block on any screen (an operation the server does not
//     offer);
//   - an uncaught exception, a Content-Security-Policy violation, a console
//     file that fails to load, or a browser dialog.
// The last line sums up: "e2e: N passed".

import { mkdtempSync, mkdirSync, readFileSync, rmSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const fx = JSON.parse(readFileSync(process.argv[2], "utf8"));
const base = `${fx.baseURL}${fx.adminPath}/`;
const executablePath = process.env.PAYMENTD_CHROMIUM || "/usr/bin/chromium";
const shots = fx.screenshots;
mkdirSync(shots, { recursive: true });

const results = [];
const problems = [];
/** Error answers of the API: { step, procedure, status, code, message }. */
const apiFailures = [];
/** Per step, the [procedure suffix, Connect code] errors it expects. */
const allowed = new Map();
let currentStep = "(start)";

async function step(name, fn, { allow = [] } = {}) {
  const started = Date.now();
  currentStep = name;
  allowed.set(name, allow);
  try {
    await fn();
    results.push({ name, status: "ok" });
    console.log(`STEP ${name}: ok (${Date.now() - started} ms)`);
  } catch (err) {
    results.push({ name, status: "fail" });
    console.log(`STEP ${name}: FAIL`);
    throw err;
  }
}

const userDataDir = mkdtempSync(join(tmpdir(), "paymentd-e2e-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1280, height: 860 },
  locale: "en-US",
  timezoneId: "UTC",
  colorScheme: "light",
  reducedMotion: "reduce",
});
context.setDefaultTimeout(30_000);

const page = context.pages()[0] ?? (await context.newPage());
page.on("pageerror", (err) => problems.push(`uncaught exception: ${err.message}`));
page.on("console", (msg) => {
  const text = msg.text();
  // A Content-Security-Policy violation means the build put something inline.
  if (/Content Security Policy|Refused to (load|execute|apply)/i.test(text)) {
    problems.push(`CSP: ${text}`);
  }
});
const bodyReads = [];
page.on("response", (res) => {
  const url = new URL(res.url());
  // Every file of the console must load.
  if (url.pathname.startsWith(fx.adminPath + "/") && res.status() >= 400) {
    problems.push(`${res.status()} for ${url.pathname}`);
  }
  // Every API call must succeed unless its step expects the error.
  if (url.pathname.startsWith("/billing.") && res.status() >= 400) {
    const failure = { step: currentStep, procedure: url.pathname, status: res.status(), code: "", message: "" };
    apiFailures.push(failure);
    bodyReads.push(
      res
        .text()
        .then((text) => {
          const body = JSON.parse(text);
          failure.code = body.code ?? "";
          failure.message = body.message ?? "";
        })
        .catch(() => {}),
    );
  }
});
page.on("dialog", (d) => {
  problems.push(`unexpected browser dialog: ${d.message()}`);
  void d.dismiss();
});

async function shot(name) {
  const file = join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

async function expectText(locator, text) {
  await locator.filter({ hasText: text }).first().waitFor();
}

async function textOf(locator) {
  return (await locator.innerText()).replace(/\s+/g, " ").trim();
}

/** Fails unless the element with data-testid id reads exactly want. */
async function expectTestId(id, want, scope = page) {
  const el = scope.getByTestId(id);
  await el.waitFor();
  const got = await textOf(el);
  if (got !== want) throw new Error(`${id}: shows ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

/** Waits until no list or block on the page is still loading, then fails
 * when any block says its operation is not available on this server. */
async function settled() {
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
  const na = page.locator(".unavailable");
  if (await na.count()) {
    throw new Error(`"not available" on ${new URL(page.url()).pathname}: ${await textOf(na.first())}`);
  }
}

async function nav(label) {
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: label, exact: true }).click();
  await settled();
}

/** The rows of the one data table in main (or of the table named name). */
function rows(name) {
  const table = name ? page.getByRole("table", { name, exact: true }) : page.locator("main table").first();
  return table.locator("tbody tr");
}

async function expectRows(n, name) {
  const got = await rows(name).count();
  if (got !== n) throw new Error(`${name ?? "table"}: ${got} rows, want ${n}`);
}

/** A payment's link in a list (the link is labelled with the full id). */
function paymentLink(id) {
  return page.getByRole("link", { name: id, exact: true });
}

async function expectAbsent(locator, what) {
  if (await locator.count()) throw new Error(`${what} is shown`);
}

async function applyFilters(values) {
  const form = page.getByRole("search");
  for (const [label, value] of Object.entries(values)) {
    const control = form.getByLabel(label, { exact: true });
    if ((await control.evaluate((el) => el.tagName)) === "SELECT") {
      await control.selectOption(value === "" ? "" : { label: value });
    } else {
      await control.fill(value);
    }
  }
  await form.getByRole("button", { name: "Apply" }).click();
  await settled();
}

async function clearFilters() {
  await page.getByRole("search").getByRole("button", { name: "Clear" }).click();
  await page.waitForURL((u) => u.search === "");
  await settled();
}

async function login(password = fx.password) {
  await page.getByLabel("Username").fill(fx.username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByText("Signed in as").waitFor();
  await settled();
}

async function confirmDialog(buttonName) {
  const dlg = page.getByRole("dialog");
  await dlg.waitFor();
  await dlg.getByRole("button", { name: buttonName }).click();
  await dlg.waitFor({ state: "detached" });
}

/** The cells of a table's body rows as text (also inside a closed <details>). */
async function cellTexts(table) {
  return table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => (c.textContent ?? "").trim())));
}

function sameJSON(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}:\n got  ${g}\n want ${w}`);
}

/** The dashboard's trends for `days` days equal GetPaymentTrends' answer
 * for them (fx.trends, protojson: zero counts are left out): every point
 * given to uPlot and every cell of the tables. */
async function expectTrends(days) {
  const want = fx.trends[String(days)];
  const card = page.getByRole("region", { name: "Trends" });
  await card.getByRole("button", { name: `${days} days`, exact: true }).click();
  await expectText(card.locator(".chart-range"), `${want.from} to ${want.to} (UTC)`);
  await settled();
  const count = (n) => Number(n ?? 0);
  const rate = (r) => (r === undefined ? null : r * 100);
  const rateText = (r) => (r === undefined ? "—" : `${(r * 100).toFixed(1)} %`);
  for (const c of want.currencies) {
    const fig = card.locator(`figure[data-chart="money-${c.currency}"]`);
    await fig.locator("canvas").waitFor();
    const points = JSON.parse(await fig.getAttribute("data-points"));
    sameJSON(points, {
      days: want.days,
      series: [
        { label: "Received", values: c.days.map((d) => Number(d.received)) },
        { label: "Refunded", values: c.days.map((d) => Number(d.refunded)) },
      ],
    }, `${days} days, ${c.currency} chart`);
    sameJSON(await cellTexts(fig.locator("details table")), c.days.map((d) => [d.day, d.received, d.refunded]), `${days} days, ${c.currency} table`);
  }
  const fig = card.locator('figure[data-chart="success-rate"]');
  await fig.locator("canvas").waitFor();
  sameJSON(JSON.parse(await fig.getAttribute("data-points")), {
    days: want.days,
    series: want.gateways.map((g) => ({ label: g.name, values: g.days.map((d) => rate(d.successRate)) })),
  }, `${days} days, success rate chart`);
  sameJSON(
    await cellTexts(fig.locator("details table")),
    want.days.map((day, i) => [day, ...want.gateways.map((g) => rateText(g.days[i].successRate))]),
    `${days} days, success rate table`,
  );
  const summary = await cellTexts(card.getByRole("table", { name: "Gateways over the range", exact: true }));
  sameJSON(
    summary.map((r) => r.slice(0, 5)),
    want.gateways.map((g) => [g.name, String(count(g.created)), String(count(g.succeeded)), String(count(g.failed)), rateText(g.successRate)]),
    `${days} days, gateways table`,
  );
  for (const [i, g] of want.gateways.entries()) {
    if ((summary[i][5] === "—") !== (g.medianSecondsToSuccess === undefined)) {
      throw new Error(`${g.name}: median ${summary[i][5]}, API ${g.medianSecondsToSuccess}`);
    }
  }
  if ((await card.locator("figure.chart").count()) !== want.currencies.length + 1) throw new Error("a chart too many or too few");
}

/** Under the pointer, a chart's legend shows that day's figures. */
async function expectHover(days, currency) {
  const want = fx.trends[String(days)];
  const c = want.currencies.find((x) => x.currency === currency);
  let i = c.days.length - 1;
  while (i > 0 && Number(c.days[i].received) === 0) i--;
  const fig = page.locator(`figure[data-chart="money-${currency}"]`);
  const over = fig.locator(".u-over");
  await over.scrollIntoViewIfNeeded();
  const box = await over.boundingBox();
  await page.mouse.move(box.x + (box.width * i) / (want.days.length - 1), box.y + box.height / 2);
  const values = fig.locator(".u-legend .u-series .u-value");
  await page
    .waitForFunction(([el, day]) => el.querySelector(".u-series .u-value")?.textContent === day, [await fig.elementHandle(), want.days[i]], {
      timeout: 5000,
    })
    .catch(async () => {
      throw new Error(`legend after pointing at ${want.days[i]}: ${(await values.allTextContents()).join(" | ")}`);
    });
  const got = await values.allTextContents();
  sameJSON(got, [want.days[i], `${Number(c.days[i].received).toFixed(2)} ${currency}`, `${Number(c.days[i].refunded).toFixed(2)} ${currency}`], `legend on ${want.days[i]}`);
}

/** Before logging in, the console asks who is logged in and learns: nobody. */
const noSessionYet = ["/billing.identity.IdentityService/GetMe", "unauthenticated"];

let failed = false;
try {
  await step(
    "open console",
    async () => {
      const res = await page.goto(base);
      if (!res || res.status() !== 200) throw new Error(`GET ${base}: ${res?.status()}`);
      const csp = res.headers()["content-security-policy"] ?? "";
      if (!csp.includes("default-src 'self'") || !csp.includes("frame-ancestors 'none'")) throw new Error(`CSP header missing or weak: ${csp}`);
      await page.getByRole("heading", { name: "paymentd admin" }).waitFor();
      await page.getByRole("button", { name: "Log in" }).waitFor();
      await shot("login");
    },
    { allow: [noSessionYet] },
  );

  await step(
    "login with a wrong password shows the error",
    async () => {
      await page.getByLabel("Username").fill(fx.username);
      await page.getByLabel("Password").fill("not-the-password");
      await page.getByRole("button", { name: "Log in" }).click();
      await page.getByRole("alert").filter({ hasText: "Wrong username or password." }).waitFor();
    },
    { allow: [["/billing.identity.IdentityService/AdminLogin", "unauthenticated"]] },
  );

  await step("login", async () => {
    await login();
    await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
  });

  if (fx.mode === "trends") {
    await step("dashboard trends of 30 days equal GetPaymentTrends' figures", async () => {
      await page.getByRole("region", { name: "Trends" }).getByRole("button", { name: "30 days", pressed: true }).waitFor();
      await expectTrends(30);
    });
    await step("the legend shows a day's figures under the pointer", async () => {
      await expectHover(30, "CNY");
    });
    await step("dashboard trends of 7 and 90 days equal GetPaymentTrends' figures", async () => {
      await expectTrends(7);
      await expectTrends(90);
      await expectHover(90, "USD");
    });
    await step("the charts shrink to a phone's width and grow back", async () => {
      for (const width of [390, 1920, 1280]) {
        await page.setViewportSize({ width, height: 860 });
        await page.waitForFunction(() =>
          [...document.querySelectorAll("figure.chart")].every((fig) => {
            const plot = fig.querySelector(".chart-plot");
            const canvas = fig.querySelector("canvas");
            return plot && canvas && Math.abs(canvas.getBoundingClientRect().width - plot.getBoundingClientRect().width) < 2;
          }),
        );
        const overflow = await page.evaluate(() =>
          [...document.querySelectorAll("figure.chart, .range-switch")]
            .filter((el) => el.scrollWidth > el.clientWidth + 1)
            .map((el) => el.getAttribute("data-chart") ?? el.className),
        );
        if (overflow.length) throw new Error(`at ${width} px, wider than their box: ${overflow.join(", ")}`);
      }
    });
    await step("dashboard with trends, for the README", async () => {
      await expectTrends(30);
      await page.mouse.move(0, 0);
      const file = await shot("dashboard-trends");
      if (fx.docsScreenshot) copyFileSync(file, fx.docsScreenshot);
    });
  } else if (fx.mode === "smoke") {
    await step("deep link reload under " + fx.adminPath, async () => {
      await page.goto(`${base}payments/${fx.paidPayment.id}`);
      await page.reload();
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await expectText(page.locator(".subtitle"), fx.paidPayment.id);
      await settled();
      await shot(`smoke-${fx.adminPath.replace(/\W+/g, "-").replace(/^-|-$/g, "")}-payment`);
    });
    await step("navigation stays under " + fx.adminPath, async () => {
      await nav("Payments");
      const path = new URL(page.url()).pathname;
      if (path !== `${fx.adminPath}/payments`) throw new Error(`navigated to ${path}`);
      await paymentLink(fx.paidPayment.id).waitFor();
    });
  } else {
    await step("dashboard shows the figures of the world the test made", async () => {
      await settled();
      const d = fx.dashboard;
      await expectTestId("today-count", String(d.todayPayments));
      await expectTestId("success-rate", d.successRate);
      await expectTestId("pending-count", String(d.pending));
      await expectTestId("refunds-pending", String(d.refundsPending));
      await expectTestId("oldest-pending-refund", "none waiting for an admin");
      await expectTestId("money-to-return", "none");
      await expectTestId("received-CNY", d.receivedCNY);
      await expectTestId("failed-events", String(d.failedEvents));
      await expectRows(d.nodes.length, "Nodes");
      for (const id of d.nodes) {
        const row = rows("Nodes").filter({ hasText: id });
        await row.waitFor();
        await expectText(row.locator(".badge"), "alive");
      }
      await expectRows(d.leaders.length, "Leader roles");
      for (const l of d.leaders) {
        const row = rows("Leader roles").filter({ hasText: l.role }).filter({ hasText: l.holder });
        await row.waitFor();
        await expectText(row.locator(".badge"), "valid");
      }
      await shot("dashboard");
    });

    await step("payments list shows the payments created through the API, newest first", async () => {
      await nav("Payments");
      await page.getByRole("heading", { name: "Payments", level: 1 }).waitFor();
      await expectRows(20);
      const first = await rows().first().getByRole("link").first().getAttribute("aria-label");
      if (first !== fx.pendingPayment.id) throw new Error(`first row is ${first}, want the newest payment ${fx.pendingPayment.id}`);
      await paymentLink(fx.failedPayment.id).waitFor();
      await paymentLink(fx.paidPayment.id).waitFor();
      await expectAbsent(paymentLink(fx.oldestPayment), "the oldest payment on page 1");
      await expectText(page.getByRole("navigation", { name: "Pages" }), `Page 1 of 2 · ${fx.dashboard.todayPayments} total`);
      await shot("payments");
    });

    await step("payments paging", async () => {
      const pager = page.getByRole("navigation", { name: "Pages" });
      await pager.getByRole("button", { name: "Next" }).click();
      await page.waitForURL(/[?&]page=2\b/);
      await settled();
      await expectText(page.getByRole("navigation", { name: "Pages" }), "Page 2 of 2");
      await expectRows(fx.dashboard.todayPayments - 20);
      const last = await rows().last().getByRole("link").first().getAttribute("aria-label");
      if (last !== fx.oldestPayment) throw new Error(`last row is ${last}, want the oldest payment ${fx.oldestPayment}`);
      if (!(await page.getByRole("button", { name: "Next" }).isDisabled())) throw new Error("Next is enabled on the last page");
      await shot("payments-page-2");
      await page.getByRole("button", { name: "Previous" }).click();
      await page.waitForURL((u) => u.searchParams.get("page") === "1");
      await settled();
      await paymentLink(fx.pendingPayment.id).waitFor();
    });

    await step("payments filters: status, gateway interface, order", async () => {
      await applyFilters({ Status: "pending" });
      await page.waitForURL(/status=pending/);
      await expectRows(1);
      await paymentLink(fx.pendingPayment.id).waitFor();

      await applyFilters({ Status: "failed" });
      await expectRows(1);
      await paymentLink(fx.failedPayment.id).waitFor();

      await page.locator('select[name="interface"]').waitFor();
      await applyFilters({ Status: "", "Gateway interface": fx.gatewayInterfaceName });
      await page.waitForURL(/interface=/);
      await expectRows(2);
      await paymentLink(fx.pendingPayment.id).waitFor();
      await paymentLink(fx.failedPayment.id).waitFor();
      await expectAbsent(paymentLink(fx.paidPayment.id), "a balance payment under the bank-transfer interface");

      await applyFilters({ "Gateway interface": "", Status: "pending", Order: fx.paidPayment.orderId });
      await page.getByText("No payments match these filters.").waitFor();
      await applyFilters({ Status: "" });
      await expectRows(1);
      await paymentLink(fx.paidPayment.id).waitFor();
      await clearFilters();
      await expectRows(20);
    });

    await step("payment detail shows its order", async () => {
      await paymentLink(fx.paidPayment.id).click();
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      await expectText(page.locator("section.card"), fx.paidPayment.orderId);
      await expectTestId("payment-status", "success");
      await shot("payment-detail");
    });

    await step("refund part of a payment", async () => {
      const form = page.getByRole("form", { name: "Refund" });
      await form.waitFor();
      await form.getByLabel("Amount").fill(fx.refundAmount);
      await form.getByRole("button", { name: "Refund…" }).click();
      await confirmDialog(`Refund ${fx.refundAmount} ${fx.paidPayment.currency}`);
      await page.getByTestId("refunded-amount").filter({ hasText: `${fx.refundAmount} ${fx.paidPayment.currency}` }).waitFor();
      await settled();
      await shot("payment-refunded");
    });

    await step("refund the rest in full", async () => {
      const form = page.getByRole("form", { name: "Refund" });
      await form.getByLabel("Amount").fill("");
      await form.getByRole("button", { name: "Refund…" }).click();
      await page.getByRole("dialog").getByRole("heading", { name: "Refund in full?" }).waitFor();
      await confirmDialog(/^Refund \d+\.\d\d /);
      await page.getByTestId("payment-status").filter({ hasText: "refunded" }).waitFor();
      await page.getByTestId("refunded-amount").filter({ hasText: fx.paidPayment.amount }).waitFor();
      await settled();
      await expectAbsent(page.getByRole("form", { name: "Refund" }), "a refund form on a refunded payment");
    });

    await step("audit entry of the refund", async () => {
      const audit = page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Audit trail" }) });
      await expectText(audit.locator("tbody tr"), "payment.refund");
      const refunds = page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Refunds" }) });
      await expectText(refunds.locator("tbody tr"), `${fx.refundAmount} ${fx.paidPayment.currency}`);
    });

    await step("confirm a bank transfer", async () => {
      await page.goto(`${base}payments/${fx.pendingPayment.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      const form = page.getByRole("form", { name: "Confirm bank transfer" });
      await form.getByLabel("Bank reference").fill("E2E-TRANSFER-0001");
      await form.getByRole("button", { name: "Confirm bank transfer…" }).click();
      await confirmDialog("Confirm transfer");
      await page.getByTestId("payment-status").filter({ hasText: "success" }).waitFor();
      await settled();
      await shot("payment-transfer-confirmed");
    });

    const bank = fx.pendingPayment;
    const bankAmount = `${bank.amount} ${bank.currency}`;
    const refundRows = () => rows("Refunds of this payment");

    await step("refund the bank transfer: pending until it is sent back by hand", async () => {
      const form = page.getByRole("form", { name: "Refund" });
      await form.getByLabel("Reason", { exact: true }).fill(fx.manualRefund.reason);
      await form.getByRole("button", { name: "Refund…" }).click();
      const dlg = page.getByRole("dialog");
      await dlg.getByRole("heading", { name: "Refund in full?" }).waitFor();
      await expectText(dlg, `Reason: ${fx.manualRefund.reason}`);
      await confirmDialog(`Refund ${bankAmount}`);
      // The page says what happened and what the admin must do next.
      const outcome = page.getByTestId("refund-outcome");
      await expectText(outcome, `Refund of ${bankAmount} pending: the gateway completes it later`);
      await expectText(outcome, `transfer ${bankAmount} back to the payer`);
      await expectText(outcome, "sent back by hand");
      await expectText(outcome, "Record outcome");
      if ((await outcome.getAttribute("role")) !== "status") throw new Error("the pending notice is not a status");
      await settled();
      // Nothing is refunded yet, and nothing more can be: the refund
      // reserves the whole amount.
      await expectTestId("payment-status", "success");
      await expectTestId("refunded-amount", `0.00 ${bank.currency}`);
      await expectAbsent(page.getByRole("form", { name: "Refund" }), "a refund form while everything is reserved");
      await expectText(page.getByRole("group", { name: "Refund" }), "Nothing left to refund");
      await expectRows(1, "Refunds of this payment");
      const row = refundRows().first();
      await expectText(row.locator(".badge"), "pending");
      await expectText(row, fx.manualRefund.reason);
      await expectText(row, "refund manually");
      await row.getByRole("button", { name: /^Record outcome/ }).waitFor();
      await expectText(rows("Audit trail of this payment, its order and its refunds"), "refund.accepted");
      await shot("payment-refund-pending");
    });

    await step("dashboard counts the pending refund and its age", async () => {
      await nav("Dashboard");
      await expectTestId("refunds-pending", "1");
      const oldest = await textOf(page.getByTestId("oldest-pending-refund"));
      if (!/^oldest waiting \d+ (s|min)\b/.test(oldest)) throw new Error(`oldest pending refund: ${JSON.stringify(oldest)}`);
      await shot("dashboard-refund-pending");
    });

    await step("the dashboard's pending refunds lead to the refunds list", async () => {
      await page.getByRole("link", { name: "Show pending refunds" }).click();
      await page.waitForURL((u) => u.pathname === `${fx.adminPath}/refunds` && u.searchParams.get("status") === "pending");
      await page.getByRole("heading", { name: "Refunds", level: 1 }).waitFor();
      await settled();
      const status = await page.getByRole("search").getByLabel("Status", { exact: true }).inputValue();
      if (status !== "pending") throw new Error(`the status filter shows ${JSON.stringify(status)}`);
      // The one pending refund, of every payment's: the bank transfer's.
      await expectRows(1, "Refunds pending");
      const row = rows("Refunds pending").first();
      await expectText(row.locator(".badge"), "pending");
      await expectText(row, bankAmount);
      await expectText(row, fx.manualRefund.reason);
      await expectText(row, "refund manually");
      await row.getByRole("link", { name: bank.id, exact: true }).waitFor();
      const waited = await textOf(row.locator("td").nth(4));
      if (!/^\d+ (s|min)$/.test(waited)) throw new Error(`age of the pending refund: ${JSON.stringify(waited)}`);
      await expectText(page.getByRole("navigation", { name: "Pages" }), "Page 1 of 1 · 1 total");
      // The picture shows the list, not the toast of the refund.
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      await shot("refunds-pending");
      // The paid payment's two refunds succeeded: not pending.
      await applyFilters({ Status: "succeeded" });
      await page.waitForURL(/status=succeeded/);
      await expectRows(2, "Refunds succeeded");
      await paymentLink(fx.paidPayment.id).first().waitFor();
      await expectAbsent(paymentLink(bank.id), "the pending refund among the succeeded ones");
      await applyFilters({ Status: "pending" });
      await page.waitForURL(/status=pending/);
      await expectRows(1, "Refunds pending");
    });

    await step("from the refunds list to the refund's payment", async () => {
      await paymentLink(bank.id).click();
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await expectText(page.locator(".subtitle"), bank.id);
      await settled();
      await refundRows().first().getByRole("button", { name: /^Record outcome/ }).waitFor();
    });

    await step("record the refund's outcome: sent back by hand", async () => {
      // On the payment page the refunds list led to.
      const path = new URL(page.url()).pathname;
      if (path !== `${fx.adminPath}/payments/${bank.id}`) throw new Error(`recording from ${path}`);
      await refundRows().first().getByRole("button", { name: /^Record outcome/ }).click();
      const dlg = page.getByRole("dialog", { name: "Record the outcome of a refund" });
      await dlg.waitFor();
      await expectText(dlg, bankAmount);
      const focused = await page.evaluate(() => document.activeElement?.getAttribute("value"));
      if (focused !== "succeeded") throw new Error(`focus starts on ${focused}, want the first outcome`);
      // Refused in the page, before anything is sent: no outcome, no note.
      const submit = dlg.getByRole("button", { name: "Record outcome…" });
      await submit.click();
      await dlg.getByRole("alert").filter({ hasText: "Choose what happened at the gateway" }).waitFor();
      await dlg.getByRole("radio", { name: /^Succeeded/ }).check();
      await dlg.getByLabel("Gateway or bank reference", { exact: true }).fill(fx.manualRefund.reference);
      await submit.click();
      await dlg.getByRole("alert").filter({ hasText: "Enter a note" }).waitFor();
      await dlg.getByLabel("Note", { exact: true }).fill(fx.manualRefund.note);
      await dlg.screenshot({ path: join(shots, "refund-outcome-dialog.png") });
      await submit.click();
      const confirm = page.getByRole("dialog", { name: "Record the refund as succeeded?" });
      await confirm.waitFor();
      await expectText(confirm, `${bankAmount} counts as refunded`);
      await expectAbsent(dlg.locator(".error"), "the note's error once a note is given");
      // The viewport, where the modal and its backdrop are.
      await page.screenshot({ path: join(shots, "refund-outcome-confirm.png") });
      await confirm.getByRole("button", { name: "Record as succeeded" }).click();
      await dlg.waitFor({ state: "detached" });
      await expectText(page.getByTestId("refund-outcome"), `Refund of ${bankAmount} recorded as succeeded`);
      await page.getByTestId("payment-status").filter({ hasText: "refunded" }).waitFor();
      await settled();
      await expectTestId("refunded-amount", bankAmount);
      const row = refundRows().first();
      await expectText(row.locator(".badge"), "succeeded");
      await expectText(row, fx.manualRefund.reference);
      await expectAbsent(page.getByRole("button", { name: /^Record outcome/ }), "a Record outcome action for a recorded refund");
      await expectText(rows("Audit trail of this payment, its order and its refunds"), "refund.resolve");
      await shot("payment-refund-resolved");
    });

    await step("refunds list: nothing pending once recorded", async () => {
      await nav("Refunds");
      await page.getByRole("heading", { name: "Refunds", level: 1 }).waitFor();
      // Every refund, newest first: the bank transfer's, now succeeded.
      await expectRows(3, "Refunds");
      const newest = rows("Refunds").first();
      await newest.getByRole("link", { name: bank.id, exact: true }).waitFor();
      await expectText(newest.locator(".badge"), "succeeded");
      await applyFilters({ Status: "pending" });
      await page.waitForURL(/status=pending/);
      await page.getByText("No refund is waiting for its gateway or an admin.").waitFor();
    });

    await step("payments after the refund and the confirmation", async () => {
      await nav("Payments");
      await paymentLink(fx.paidPayment.id).waitFor();
      // The picture shows the list, not the toast of the last action.
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      const file = await shot("payments-after");
      // The README's picture (task ui-screenshot).
      if (fx.docsScreenshot) copyFileSync(file, fx.docsScreenshot);
    });

    await step("deep link to a payment survives a reload", async () => {
      await page.goto(`${base}payments/${fx.paidPayment.id}`);
      await page.reload();
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await expectText(page.locator(".subtitle"), fx.paidPayment.id);
      await page.getByTestId("payment-status").waitFor();
      await settled();
    });

    await step("orders", async () => {
      await nav("Orders");
      await page.getByRole("link", { name: fx.paidPayment.orderId }).waitFor();
      await shot("orders");
      await page.getByRole("link", { name: fx.paidPayment.orderId }).click();
      await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
      await settled();
      await paymentLink(fx.paidPayment.id).waitFor();
      await shot("order-detail");
    });

    await step("customer: API key permission and balance", async () => {
      await nav("Customers");
      await page.getByRole("link", { name: fx.customerId }).waitFor();
      await shot("customers");
      await page.getByRole("link", { name: fx.customerId }).click();
      await settled();
      const sw = page.getByRole("switch", { name: /API keys/ });
      const before = await sw.getAttribute("aria-checked");
      await sw.click();
      await page.waitForFunction(
        (want) => document.querySelector('[role="switch"]')?.getAttribute("aria-checked") === want,
        before === "true" ? "false" : "true",
      );
      await settled();
      const balanceBefore = await page.getByTestId("balance").innerText();
      const form = page.getByRole("form", { name: "Adjust balance" });
      await form.getByLabel("Amount").fill("5.25");
      await form.getByLabel("Note").fill("e2e goodwill credit");
      await form.getByRole("button", { name: "Adjust balance…" }).click();
      await confirmDialog("Adjust balance");
      await page.waitForFunction((b) => document.querySelector('[data-testid="balance"]')?.textContent !== b, balanceBefore);
      await settled();
      await shot("customer-detail");
    });

    await step("customer: disable, enable, sign out everywhere", async () => {
      // On the customer's page still.
      await expectTestId("customer-status", "active");
      const disable = page.getByRole("form", { name: "Disable account" });
      await disable.getByLabel("Reason").fill(fx.disableReason);
      await disable.getByRole("button", { name: "Disable account…" }).click();
      await confirmDialog("Disable account");
      await page.getByTestId("customer-status").filter({ hasText: "disabled" }).waitFor();
      await settled();
      await page.getByRole("button", { name: "Enable account" }).waitFor();
      await expectAbsent(page.getByRole("form", { name: "Disable account" }), "the disable form of a disabled account");
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      await shot("customer-disabled");
      await page.getByRole("button", { name: "Enable account" }).click();
      await page.getByTestId("customer-status").filter({ hasText: /^active$/ }).waitFor();
      await settled();
      const signOut = page.getByRole("form", { name: "Sign out everywhere" });
      await signOut.getByLabel("Also revoke their API keys").check();
      await signOut.getByRole("button", { name: "Sign out everywhere…" }).click();
      await confirmDialog("Sign out everywhere");
      await expectText(page.locator(".toast"), "Signed out everywhere; 1 API key revoked.");
      await settled();
    });

    await step("new gateway interface: the Stripe plugin's form comes from its schema", async () => {
      await nav("Gateway interfaces");
      await page.getByRole("heading", { name: "Gateway interfaces", level: 1 }).waitFor();
      const form = page.getByRole("form", { name: "New gateway interface" });
      await form.waitFor();
      await form.getByLabel("Plugin").selectOption("stripe");
      const config = form.getByLabel("Webhook signing secret");
      await config.waitFor();
      for (const [label, type] of [["Secret key", "password"], ["Webhook signing secret", "password"], ["API base URL", "text"]]) {
        const got = await form.getByLabel(label).getAttribute("type");
        if ((got ?? "text") !== type) throw new Error(`the Stripe form's ${label} is a ${got} field, want ${type}`);
      }
      await form.screenshot({ path: join(shots, "gateway-new-stripe.png") });
    });

    await step("gateway interfaces: the config form masks secrets", async () => {
      await nav("Gateway interfaces");
      await page.getByRole("heading", { name: "Gateway interfaces", level: 1 }).waitFor();
      await page.getByRole("link", { name: fx.gatewayInterfaceName }).waitFor();
      await page.getByRole("link", { name: fx.secretInterface.name }).waitFor();
      await shot("gateways");
      await page.getByRole("link", { name: fx.secretInterface.name }).click();
      await page.getByRole("heading", { name: "Gateway interface", level: 1 }).waitFor();
      await settled();
      const form = page.getByRole("form", { name: "Edit gateway interface" });
      const config = form.getByRole("group", { name: "Configuration" });
      await config.waitFor();
      const pid = await config.getByLabel("Merchant ID (pid)").inputValue();
      if (pid !== fx.secretInterface.pid) throw new Error(`pid shows ${pid}`);
      const key = config.getByLabel("Merchant key");
      if ((await key.getAttribute("type")) !== "password") throw new Error("the merchant key is not a password field");
      if ((await key.inputValue()) !== "") throw new Error("the merchant key field is filled in");
      if (!/stored/.test((await key.getAttribute("placeholder")) ?? "")) throw new Error("the key field does not say a secret is stored");
      // Nowhere on the page, in no attribute or field value.
      const leaked = await page.evaluate((secret) => {
        const values = [...document.querySelectorAll("input, textarea")].map((el) => el.value);
        return document.documentElement.outerHTML.includes(secret) || values.some((v) => v.includes(secret));
      }, fx.secretInterface.secret);
      if (leaked) throw new Error("the merchant key reached the page");
      await shot("gateway-detail");
      await form.screenshot({ path: join(shots, "gateway-config-form.png") });
    });

    await step("gateway interfaces: the alipay form from its schema", async () => {
      await nav("Gateway interfaces");
      await page.getByRole("link", { name: fx.alipayInterface.name }).click();
      await page.getByRole("heading", { name: "Gateway interface", level: 1 }).waitFor();
      await settled();
      const form = page.getByRole("form", { name: "Edit gateway interface" });
      const config = form.getByRole("group", { name: "Configuration" });
      await config.waitFor();
      const appId = await config.getByLabel("App ID (APPID)").inputValue();
      if (appId !== fx.alipayInterface.appId) throw new Error(`app_id shows ${appId}`);
      const pub = await config.getByLabel("Alipay public key").inputValue();
      if (pub !== fx.alipayInterface.publicKey) throw new Error(`the Alipay public key shows ${JSON.stringify(pub)}`);
      const key = config.getByLabel("App private key");
      if ((await key.getAttribute("type")) !== "password") throw new Error("the app private key is not a password field");
      if ((await key.inputValue()) !== "") throw new Error("the app private key field is filled in");
      if (!/stored/.test((await key.getAttribute("placeholder")) ?? "")) throw new Error("the key field does not say a secret is stored");
      const qr = config.getByLabel("QR code instead of the cashier page");
      if ((await qr.getAttribute("type")) !== "checkbox") throw new Error("qr_mode is not a checkbox");
      if (await qr.isChecked()) throw new Error("qr_mode is on by default");
      const gatewayURL = await config.getByLabel("Gateway URL").inputValue();
      if (gatewayURL !== "https://openapi.alipay.com/gateway.do") throw new Error(`the gateway URL shows ${gatewayURL}`);
      const leaked = await page.evaluate((secret) => {
        const values = [...document.querySelectorAll("input, textarea")].map((el) => el.value);
        return document.documentElement.outerHTML.includes(secret) || values.some((v) => v.includes(secret));
      }, fx.alipayInterface.secret);
      if (leaked) throw new Error("the app private key reached the page");
      await form.screenshot({ path: join(shots, "gateway-alipay-form.png") });
    });

    await step("plugins and reload", async () => {
      await nav("Plugins");
      await page.getByRole("heading", { name: "Plugins", level: 1 }).waitFor();
      await page.getByRole("link", { name: fx.testPlugin.name, exact: true }).waitFor();
      await page.getByRole("button", { name: "Reload plugins" }).click();
      await page.getByRole("heading", { name: /^Reload: \d+ files/ }).waitFor();
      await settled();
      await shot("plugins");
    });

    await step("plugin detail: version, status, its admin page as text", async () => {
      await page.getByRole("link", { name: fx.testPlugin.name, exact: true }).click();
      await page.getByRole("heading", { name: `Plugin ${fx.testPlugin.name}`, level: 1 }).waitFor();
      await settled();
      await expectTestId("plugin-version", fx.testPlugin.version);
      await expectTestId("plugin-status", "loaded");
      await expectTestId("plugin-enabled", "enabled");
      const pageBox = page.getByTestId("plugin-page");
      await pageBox.waitFor();
      const shown = await pageBox.evaluate((el) => ({ text: el.textContent, elements: el.querySelectorAll("*").length }));
      if (shown.text !== fx.testPlugin.page) throw new Error(`the plugin page shows ${JSON.stringify(shown.text)}`);
      if (shown.elements !== 0) throw new Error(`the plugin page was rendered as HTML: ${shown.elements} elements`);
      const pwned = await page.evaluate(() => window.__pwned ?? null);
      if (pwned !== null) throw new Error(`the plugin page ran script (${pwned})`);
      if (await page.locator("main img, main script").count()) throw new Error("markup of the plugin page reached the document");
      await shot("plugin-detail");
    });

    await step("plugin disable and enable round trip", async () => {
      await page.getByRole("button", { name: "Disable plugin…" }).click();
      await confirmDialog("Disable plugin");
      await page.getByTestId("plugin-enabled").filter({ hasText: "disabled" }).waitFor();
      await settled();
      await shot("plugin-disabled");
      await page.getByRole("button", { name: "Enable plugin" }).click();
      await page.getByTestId("plugin-enabled").filter({ hasText: /^enabled$/ }).waitFor();
      await settled();
      await page.getByRole("button", { name: "Disable plugin…" }).waitFor();
    });

    await step("events: filter and retry a failed event", async () => {
      await nav("Events");
      await page.getByRole("heading", { name: "Events", level: 1 }).waitFor();
      await shot("events");
      await applyFilters({ Status: "failed" });
      await page.waitForURL(/status=failed/);
      const failedRow = rows().filter({ has: page.getByRole("link", { name: fx.failedEventId }) });
      await failedRow.waitFor();
      const statuses = await rows().locator("td .badge").allInnerTexts();
      if (statuses.length === 0 || statuses.some((s) => s !== "failed")) throw new Error(`status filter shows ${statuses.join(", ")}`);
      await shot("events-failed");
      await failedRow.getByRole("button", { name: "Retry" }).click();
      await confirmDialog("Retry event");
      await page.waitForFunction(
        (id) => {
          const link = [...document.querySelectorAll("tbody tr a")].find((a) => a.getAttribute("aria-label") === id);
          return !link || link.closest("tr")?.querySelector(".badge")?.textContent !== "failed";
        },
        fx.failedEventId,
      );
      await settled();
      await shot("events-retried");

      await applyFilters({ Status: "", Type: "order_provisioned" });
      await page.waitForURL(/type=order_provisioned/);
      const types = await rows().locator("td:nth-child(2)").allInnerTexts();
      if (types.length === 0 || types.some((s) => s !== "order_provisioned")) throw new Error(`type filter shows ${types.join(", ")}`);
      await clearFilters();
    });

    await step("event detail and its notifications", async () => {
      await page.goto(`${base}events/${fx.notifiedEventId}`);
      await page.getByRole("heading", { name: "Event", level: 1 }).waitFor();
      await settled();
      await expectText(page.locator(".subtitle"), fx.notifiedEventId);
      const notes = rows("Notifications of this event");
      await notes.first().waitFor();
      await expectText(notes, "webhook");
      await shot("event-detail");
    });

    await step("notifications", async () => {
      await nav("Notifications");
      await page.getByRole("heading", { name: "Notifications", level: 1 }).waitFor();
      await rows().first().waitFor();
      await applyFilters({ Status: "sent", Channel: "webhook" });
      await page.waitForURL(/status=sent/);
      const statuses = await rows().locator("td .badge").allInnerTexts();
      if (statuses.length === 0 || statuses.some((s) => s !== "sent")) throw new Error(`status filter shows ${statuses.join(", ")}`);
      await shot("notifications");
    });

    await step("a bank transfer that arrives after its order was cancelled is credited to the balance in one step", async () => {
      const late = fx.failedPayment;
      const amount = `${late.amount} ${late.currency}`;
      await page.goto(`${base}payments/${late.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      const form = page.getByRole("form", { name: "Confirm bank transfer" });
      await form.getByLabel("Bank reference").fill("E2E-LATE-TRANSFER-0001");
      await form.getByRole("button", { name: "Confirm bank transfer…" }).click();
      await expectText(page.getByRole("dialog"), "recorded as money to return");
      await confirmDialog("Confirm transfer");
      await page.getByTestId("captured-amount").waitFor();
      await settled();
      await expectTestId("payment-status", "failed");
      await expectText(page.getByTestId("captured-amount"), `${amount} still to return`);

      // The payment page offers the one-step credit too.
      await page.getByTestId("credit-to-balance").waitFor();

      await nav("Dashboard");
      await expectTestId("money-to-return", amount);
      await expectRows(1, "Money to return");
      await expectText(rows("Money to return").first(), "order cancelled");
      await shot("dashboard-money-to-return");
      await page.getByRole("link", { name: "Show money to return" }).click();
      await page.waitForURL((u) => u.pathname === `${fx.adminPath}/payments` && u.searchParams.get("return") === "1");
      await settled();
      await expectRows(1);
      await expectText(rows().first(), "money to return");
      await shot("payments-money-to-return");

      // Returned in one step from the dashboard's queue.
      await nav("Dashboard");
      await rows("Money to return").first().getByRole("button", { name: /^Credit .* to balance: payment / }).click();
      await confirmDialog(`Credit ${amount}`);
      await page.getByText("No captured money waits to go back.").waitFor();
      await page.goto(`${base}payments/${late.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await page.getByTestId("refunded-amount").filter({ hasText: amount }).waitFor();
      await settled();
      await expectTestId("payment-status", "failed");
      await expectText(rows("Refunds of this payment").first(), "balance");
      await expectAbsent(page.getByTestId("credit-to-balance"), "a credit button once everything went back");
      await shot("payment-credited-to-balance");
      await nav("Dashboard");
      await expectTestId("money-to-return", "none");
    });
  }

  if (fx.mode === "full") {
    await step(
      "API keys: create one, shown once, that works within its scope, then revoke it",
      async () => {
        await nav("API keys");
        await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
        await page.getByText("No admin API key yet.").waitFor();
        const form = page.getByRole("form", { name: "Create an API key" });
        await form.getByRole("button", { name: "Create key" }).click();
        await form.getByRole("alert").filter({ hasText: "Name the key." }).waitFor();
        await form.getByLabel("Name").fill(fx.adminKeyName);
        await form.getByLabel("Scope").selectOption("operate");
        await form.getByRole("button", { name: "Create key" }).click();
        const shownKey = page.getByTestId("new-key");
        await shownKey.waitFor();
        const key = await shownKey.inputValue();
        if (!/^ak_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/.test(key)) throw new Error(`the new key reads ${JSON.stringify(key)}`);
        await settled();
        await expectRows(1, "Admin API keys");
        const row = rows("Admin API keys").first();
        await expectText(row, fx.adminKeyName);
        await expectText(row, "operate");
        await expectText(row.locator(".badge"), "active");
        await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
        await shot("api-keys");
        // The key, sent without the session, is an operate key of this admin.
        const call = (k) =>
          page.evaluate(async (k) => {
            const res = await fetch("/billing.identity.IdentityService/GetMe", {
              method: "POST",
              credentials: "omit",
              headers: { "Content-Type": "application/json", "X-Api-Key": k },
              body: "{}",
            });
            return { status: res.status, body: await res.json() };
          }, k);
        const me = await call(key);
        if (me.status !== 200 || me.body.scope !== "operate" || me.body.credential !== "api_key" || me.body.username !== fx.username) {
          throw new Error(`GetMe with the new key: ${JSON.stringify(me)}`);
        }
        // Shown once: after a reload only its prefix is on the page.
        await page.reload();
        await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
        await settled();
        const leaked = await page.evaluate((k) => document.documentElement.outerHTML.includes(k.slice(-43)), key);
        if (leaked) throw new Error("the key's secret is on the page after a reload");
        await rows("Admin API keys").first().getByRole("button", { name: `Revoke ${fx.adminKeyName}` }).click();
        await confirmDialog("Revoke key");
        await rows("Admin API keys").first().locator(".badge").filter({ hasText: "revoked" }).waitFor();
        await settled();
        const after = await call(key);
        if (after.status !== 401) throw new Error(`GetMe with the revoked key answered ${after.status}`);
      },
      { allow: [["/billing.identity.IdentityService/GetMe", "unauthenticated"]] },
    );

    await step(
      "change the admin's password: the session goes on",
      async () => {
        await page.getByRole("link", { name: "Change password" }).click();
        await page.getByRole("heading", { name: "Account", level: 1 }).waitFor();
        const form = page.getByRole("form", { name: "Change password" });
        await form.getByLabel("Current password").fill("not-the-password");
        await form.getByLabel("New password", { exact: true }).fill(fx.newPassword);
        await form.getByLabel("New password again").fill(fx.newPassword);
        await form.getByRole("button", { name: "Change password" }).click();
        await form.getByRole("alert").filter({ hasText: "the current password is not right" }).waitFor();
        await form.getByLabel("Current password").fill(fx.password);
        await form.getByLabel("New password", { exact: true }).fill(fx.newPassword);
        await form.getByLabel("New password again").fill(fx.newPassword);
        await form.getByRole("button", { name: "Change password" }).click();
        await page.getByTestId("password-changed").waitFor();
        await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
        await shot("account-password-changed");
        // The answer's cookie is the new session: the console goes on.
        await nav("Dashboard");
        await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
      },
      { allow: [["/billing.identity.IdentityService/ChangePassword", "permission_denied"]] },
    );
  }

  await step(
    "logout",
    async () => {
      await page.getByRole("button", { name: "Log out" }).click();
      await page.getByText("You are logged out.").waitFor();
      await page.reload();
      await page.getByRole("button", { name: "Log in" }).waitFor();
    },
    { allow: [noSessionYet] },
  );

  if (fx.mode === "full") {
    await step(
      "the old password no longer logs in, the new one does",
      async () => {
        await page.getByLabel("Username").fill(fx.username);
        await page.getByLabel("Password").fill(fx.password);
        await page.getByRole("button", { name: "Log in" }).click();
        await page.getByRole("alert").filter({ hasText: "Wrong username or password." }).waitFor();
        await login(fx.newPassword);
        await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
      },
      { allow: [["/billing.identity.IdentityService/AdminLogin", "unauthenticated"]] },
    );
  }

  await step("no failed API call, console error, CSP violation or missing file", async () => {
    await Promise.all(bodyReads);
    for (const f of apiFailures) {
      const ok = (allowed.get(f.step) ?? []).some(([proc, code]) => f.procedure.endsWith(proc) && f.code === code);
      if (!ok) problems.push(`API error in step "${f.step}": ${f.procedure} answered ${f.status} ${f.code}: ${f.message}`);
    }
    if (problems.length) throw new Error(problems.join("\n"));
  });
} catch (err) {
  failed = true;
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  try {
    await Promise.all(bodyReads);
    for (const f of apiFailures) console.error(`API error in step "${f.step}": ${f.procedure} ${f.status} ${f.code}: ${f.message}`);
    console.error(`page: ${page.url()}`);
    console.error(`failure screenshot: ${await shot("failure")}`);
    console.error((await page.locator("body").innerText()).slice(0, 3000));
  } catch {
    // the browser may be gone
  }
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}

const passed = results.filter((r) => r.status === "ok").length;
console.log(`e2e: ${passed} passed${failed ? ", 1 failed" : ""}`);
process.exit(failed ? 1 : 0);
