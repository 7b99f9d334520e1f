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
//     file that fails to load, or a browser dialog;
//   - a screen whose layout does not fit at 390, 1280 or 1920 px wide
//     (checkLayout, on every screen photographed): the page scrolling
//     sideways, an element whose content overflows it without it being a
//     scroll frame, an element sticking out of its card or of main, a fixed
//     element (a toast) showing over main, or, at 1280 and 1920 px, a table
//     scrolling sideways inside a card.
// The last line sums up: "e2e: N passed".

import { mkdtempSync, mkdirSync, readFileSync, rmSync, copyFileSync, writeFileSync } from "node:fs";
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

/** Photographs the screen (after checking its layout at every width). */
async function shot(name, { check = true } = {}) {
  if (check) await checkLayout(name);
  const file = join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** The widths every screen must fit: a phone, a laptop, a desktop. */
const layoutWidths = [390, 1280, 1920];

async function nextFrame() {
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

/** Fails when the screen does not fit at one of layoutWidths (see the top
 * of this file); the viewport is put back as it was. */
async function checkLayout(where) {
  const size = page.viewportSize();
  const found = [];
  try {
    for (const width of layoutWidths) {
      await page.setViewportSize({ width, height: size.height });
      await nextFrame();
      for (const p of await page.evaluate(layoutProblems, width >= 1280)) found.push(`${where} at ${width} px: ${p}`);
    }
  } finally {
    await page.setViewportSize(size);
    await nextFrame();
  }
  if (found.length) throw new Error(`layout does not fit:\n${found.slice(0, 20).join("\n")}`);
}

/** Runs in the page: what does not fit at this width. */
function layoutProblems(desktop) {
  const out = [];
  const name = (el) => {
    const cls = typeof el.className === "string" && el.className ? `.${el.className.trim().split(/\s+/).join(".")}` : "";
    const text = (el.textContent ?? "").replace(/\s+/g, " ").trim().slice(0, 40);
    return `<${el.tagName.toLowerCase()}${cls}> "${text}"`;
  };
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const ancestors = function* (el) {
    for (let a = el.parentElement; a; a = a.parentElement) yield a;
  };
  // Hidden on purpose (screen-reader text), on top of the page (a dialog),
  // or a form control (a long value scrolls inside it).
  const ignored = (el) => el.closest(".visually-hidden, dialog, .toast, .skip-link") || ["INPUT", "SELECT", "TEXTAREA", "OPTION"].includes(el.tagName);
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) {
    // Name the outermost elements that reach past the window's edge.
    const past = (el) => el.getBoundingClientRect().right > doc.clientWidth + 1;
    const framed = (el) => [...ancestors(el)].some((a) => scrolls(a) && !past(a));
    const culprits = [...document.body.querySelectorAll("*")].filter((el) => past(el) && !framed(el) && !(el.parentElement && past(el.parentElement)));
    out.push(`the page scrolls sideways: ${doc.scrollWidth} px in ${doc.clientWidth} px (${culprits.slice(0, 3).map(name).join(", ") || "body"})`);
  }
  for (const el of document.body.querySelectorAll("*")) {
    if (ignored(el)) continue;
    const display = getComputedStyle(el).display;
    if (display === "inline" || display === "none" || display === "contents" || el.clientWidth === 0) continue;
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    if (!scrolls(el)) out.push(`${name(el)} overflows: its content is ${el.scrollWidth} px wide in ${el.clientWidth} px`);
    else if (desktop && el.parentElement?.closest(".card")) out.push(`${name(el)} scrolls sideways inside its card (${el.scrollWidth} px in ${el.clientWidth} px)`);
  }
  // Nothing floats over the page (a toast in a corner): a fixed element
  // that shows may not cover main.
  const main = document.querySelector("main")?.getBoundingClientRect();
  for (const el of document.body.querySelectorAll("*")) {
    const cs = getComputedStyle(el);
    if (cs.position !== "fixed" || el.closest("dialog") || Number(cs.opacity) === 0 || cs.visibility === "hidden" || !main) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && r.left < main.right && r.right > main.left && r.top < main.bottom && r.bottom > main.top) {
      out.push(`${name(el)} floats over the page at ${Math.round(r.left)},${Math.round(r.top)}`);
    }
  }
  for (const frame of document.querySelectorAll("main, .card")) {
    const f = frame.getBoundingClientRect();
    for (const el of frame.querySelectorAll("*")) {
      if (ignored(el)) continue;
      // Inside a scroll frame within this one: that frame holds it.
      let up = el.parentElement;
      while (up && up !== frame && !scrolls(up)) up = up.parentElement;
      if (up !== frame) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < f.left - 1 || r.right > f.right + 1) {
        out.push(`${name(el)} sticks out of ${frame.tagName === "MAIN" ? "main" : name(frame)}: ${Math.round(r.left)}–${Math.round(r.right)} outside ${Math.round(f.left)}–${Math.round(f.right)}`);
      }
    }
  }
  return [...new Set(out)];
}

/** RFC 4180: the records of a CSV text, each an object keyed by the header. */
function parseCSV(text) {
  const records = [];
  let row = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c !== '"') cell += c;
      else if (text[i + 1] === '"') {
        cell += '"';
        i++;
      } else quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(cell);
      cell = "";
    } else if (c === "\n" || (c === "\r" && text[i + 1] === "\n")) {
      if (c === "\r") i++;
      row.push(cell);
      records.push(row);
      row = [];
      cell = "";
    } else cell += c;
  }
  if (cell !== "" || row.length) {
    row.push(cell);
    records.push(row);
  }
  const [header, ...data] = records;
  for (const r of data) if (r.length !== header.length) throw new Error(`CSV record of ${r.length} cells under a header of ${header.length}`);
  return data.map((r) => Object.fromEntries(header.map((h, i) => [h, r[i]])));
}

/** Clicks the list's "Download CSV" and parses the file the browser saved. */
async function downloadCSV(kind) {
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId(`export-${kind}`).click()]);
  const failure = await download.failure();
  if (failure) throw new Error(`the ${kind} download failed: ${failure}`);
  if (!/\.csv$/.test(download.suggestedFilename())) throw new Error(`the download is named ${download.suggestedFilename()}`);
  return parseCSV(readFileSync(await download.path(), "utf8"));
}

/** Fails unless the CSV rows are exactly want (every field of want). */
function expectCSV(rows, want, what) {
  const ids = (xs) => xs.map((x) => x.id).join(", ");
  if (rows.length !== want.length) throw new Error(`${what}: ${rows.length} rows (${ids(rows)}), want ${want.length} (${ids(want)})`);
  want.forEach((w, i) => {
    for (const [k, v] of Object.entries(w)) {
      if (rows[i][k] !== v) throw new Error(`${what}: row ${i + 1} ${k} reads ${JSON.stringify(rows[i][k])}, want ${JSON.stringify(v)}`);
    }
  });
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

/** Loads the dashboard afresh (its figures as of now). */
async function openDashboard() {
  await page.goto(base);
  await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
  await settled();
}

/** Seconds of an age as the console writes it ("37 s", "2 min", "1 h 5
 * min", "2 d 3 h"): the range [low, high] it stands for. */
function ageRange(text) {
  const unit = { d: 86400, h: 3600, min: 60, s: 1 };
  const parts = [...text.matchAll(/(\d+) (d|h|min|s)\b/g)];
  if (!parts.length || parts.map((m) => m[0]).join(" ") !== text) throw new Error(`an age reads ${JSON.stringify(text)}`);
  const low = parts.reduce((n, m) => n + Number(m[1]) * unit[m[2]], 0);
  return [low, low + unit[parts.at(-1)[2]] - 1];
}

/** Opens the dashboard and checks its money to return: the amount, the
 * number of payments, and the oldest's age, which must be what the time
 * since capturedAt was while the figures loaded. */
async function expectMoneyToReturn(amount, count, capturedAt) {
  const before = Date.now();
  await openDashboard();
  await expectTestId("money-to-return", amount);
  await expectTestId("money-to-return-count", String(count));
  const after = Date.now();
  const [low, high] = ageRange(await textOf(page.getByTestId("money-to-return-oldest")));
  const captured = Date.parse(capturedAt);
  const least = Math.floor((before - captured) / 1000) - 1;
  const most = Math.ceil((after - captured) / 1000) + 1;
  if (high < least || low > most) {
    throw new Error(`the oldest money to return waited ${low}–${high} s, but it was captured ${least}–${most} s before the dashboard loaded`);
  }
  await expectRows(count, "Money to return");
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

/** The rows of the one data table in main (or of the table named name);
 * not those of a table in a cell (an audit entry's change). */
function rows(name) {
  const table = name ? page.getByRole("table", { name, exact: true }) : page.locator("main table").first();
  return table.locator(":scope > tbody > tr");
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
    if (typeof value === "boolean") {
      await control.setChecked(value);
    } else if ((await control.evaluate((el) => el.tagName)) === "SELECT") {
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

/** The secret of the two-factor enrolment the totp run made. */
let totpSecret = "";

/** The TOTP code of totpSecret for now plus steps 30-second steps, as the
 * Go test computes it with github.com/pquerna/otp. */
async function totpCode(steps) {
  const res = await fetch(`${fx.totpCodeURL}?secret=${encodeURIComponent(totpSecret)}&steps=${steps}`);
  if (!res.ok) throw new Error(`the test's TOTP helper answered ${res.status}`);
  return (await res.text()).trim();
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

/** The cells of a table's body rows as text (also of a visually hidden one). */
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
    sameJSON(await cellTexts(fig.locator(".chart-table table")), c.days.map((d) => [d.day, d.received, d.refunded]), `${days} days, ${c.currency} table`);
  }
  const fig = card.locator('figure[data-chart="success-rate"]');
  await fig.locator("canvas").waitFor();
  sameJSON(JSON.parse(await fig.getAttribute("data-points")), {
    days: want.days,
    series: want.gateways.map((g) => ({ label: g.name, values: g.days.map((d) => rate(d.successRate)) })),
  }, `${days} days, success rate chart`);
  sameJSON(
    await cellTexts(fig.locator(".chart-table table")),
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

/** The dashboard's recurring revenue of 30 days equals GetRecurringRevenue's
 * answer (fx.recurring, protojson): each currency's MRR series given to
 * uPlot, and the movements table beside it. */
async function expectRecurring() {
  const want = fx.recurring;
  const card = page.getByRole("region", { name: "Recurring revenue" });
  await card.getByRole("button", { name: "30 days", pressed: true }).waitFor();
  await expectText(card.locator(".chart-range"), `${want.from} to ${want.to} (UTC)`);
  await settled();
  const fig = (f) => `${f?.amount ?? "0.00"} (${Number(f?.services ?? 0)})`;
  if (want.currencies.length === 0) throw new Error("no recurring revenue to check");
  for (const c of want.currencies) {
    const chart = card.locator(`figure[data-chart="mrr-${c.currency}"]`);
    await chart.locator("canvas").waitFor();
    const points = JSON.parse(await chart.getAttribute("data-points"));
    sameJSON(points.days, want.days, `${c.currency} MRR days`);
    sameJSON(points.series[0], { label: "MRR", values: c.days.map((d) => Number(d.mrr?.amount ?? "0")) }, `${c.currency} MRR chart`);
    const m = c.movements ?? {};
    sameJSON(
      await cellTexts(card.getByTestId(`mrr-movements-${c.currency}`).locator("table")),
      [
        ["MRR at the start", fig(c.start)],
        ["+ New", fig(m.newBusiness)],
        ["+ Expansion", fig(m.expansion)],
        ["− Contraction", fig(m.contraction)],
        ["− Churn", fig(m.churn)],
        ["+ Reactivation", fig(m.reactivation)],
        ["MRR at the end", fig(c.end)],
      ],
      `${c.currency} movements table`,
    );
  }
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

/** The one row of a list of the Renewals screen: the order's link, then
 * the invoice (short id, the whole in its title), the amount due, the due
 * time, the days overdue and the next step with the days left. */
async function expectRenewalRow(name, want) {
  await expectRows(1, name);
  const row = rows(name).first();
  await row.getByRole("link", { name: want.orderId, exact: true }).waitFor();
  const cells = row.locator(":scope > td");
  const got = [];
  for (let i = 2; i < 7; i++) got.push(await textOf(cells.nth(i)));
  sameJSON(got, [want.invoiceId.slice(0, 8), want.amountDue, want.due, want.daysOverdue, want.nextStep], name);
  const invoice = await cells.nth(2).locator("code").getAttribute("title");
  if (invoice !== want.invoiceId) throw new Error(`${name}: the invoice's title is ${invoice}, want ${want.invoiceId}`);
}

/** Hides the toast of the last action, which would show over main in a
 * screenshot. */
async function hideToast() {
  await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
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
    if (fx.mode === "totp") {
      // [admin].require_2fa: an admin without a second factor gets the
      // enrolment and nothing else, whatever address is asked for.
      await page.getByRole("heading", { name: "Set up two-factor sign-in", level: 1 }).waitFor();
      if (await page.getByRole("navigation", { name: "Sections" }).count()) throw new Error("the sections are offered before enrolment");
      await page.goto(`${fx.baseURL}${fx.adminPath}/payments`);
      await page.getByRole("heading", { name: "Set up two-factor sign-in", level: 1 }).waitFor();
      return;
    }
    await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
  });

  if (fx.mode === "trends") {
    await step("dashboard trends of 30 days equal GetPaymentTrends' figures", async () => {
      await page.getByRole("region", { name: "Trends" }).getByRole("button", { name: "30 days", pressed: true }).waitFor();
      await expectTrends(30);
    });
    await step("dashboard recurring revenue of 30 days equals GetRecurringRevenue's figures", async () => {
      await expectRecurring();
    });
    await step("the legend shows a day's figures under the pointer", async () => {
      await expectHover(30, "CNY");
    });
    await step("dashboard trends of 7 and 90 days equal GetPaymentTrends' figures", async () => {
      await expectTrends(7);
      await expectTrends(90);
      await expectHover(90, "USD");
    });
    await step("each chart's figures are read by screen readers without opening anything; a toggle shows them", async () => {
      await expectTrends(7);
      const figs = page.getByRole("region", { name: "Trends" }).locator("figure.chart");
      const n = await figs.count();
      for (let i = 0; i < n; i++) {
        const fig = figs.nth(i);
        const title = await textOf(fig.locator("figcaption"));
        const toggle = fig.getByRole("button", { name: "Show the figures as a table" });
        if ((await toggle.getAttribute("aria-expanded")) !== "false") throw new Error(`${title}: the table's toggle starts expanded`);
        // In the accessibility tree by its caption, rendered (not inside a
        // closed <details>, hidden or aria-hidden), and out of sight.
        const tbl = fig.getByRole("table", { name: title, exact: true });
        await tbl.waitFor({ state: "attached" });
        const state = await tbl.evaluate((el) => ({
          rendered: el.checkVisibility() && !el.closest("details:not([open]), [hidden], [aria-hidden='true']"),
          width: el.closest(".chart-table").getBoundingClientRect().width,
          rows: el.querySelectorAll("tbody tr").length,
        }));
        if (!state.rendered) throw new Error(`${title}: the table is not rendered for screen readers`);
        if (state.width > 1) throw new Error(`${title}: the table shows (${state.width} px) before the toggle`);
        if (state.rows !== 7) throw new Error(`${title}: ${state.rows} rows for 7 days`);
      }
      // The toggle shows the first chart's table on the page, and the
      // screen still fits.
      const fig = figs.first();
      await fig.getByRole("button", { name: "Show the figures as a table" }).click();
      const hide = fig.getByRole("button", { name: "Hide the table" });
      if ((await hide.getAttribute("aria-expanded")) !== "true") throw new Error("the shown table's toggle is not expanded");
      const width = await fig.locator(".chart-table").evaluate((el) => el.getBoundingClientRect().width);
      if (width < 100) throw new Error(`the shown table is ${width} px wide`);
      await page.mouse.move(0, 0);
      await shot("dashboard-trends-table");
      await hide.click();
      await fig.getByRole("button", { name: "Show the figures as a table" }).waitFor();
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
      if (fx.docsScreenshots) copyFileSync(file, join(fx.docsScreenshots, "dashboard.png"));
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
  } else if (fx.mode === "renewals") {
    const r = fx.renewals;
    await step("renewals: what falls due, what is overdue and what is suspended, as GetRenewalOverview has them", async () => {
      await nav("Renewals");
      await page.getByRole("heading", { name: "Renewals", level: 1 }).waitFor();
      await page.getByRole("heading", { name: "Due in the next 30 days" }).waitFor();
      await expectTestId("due-CNY", r.dueCNY);
      await expectTestId("due-count-CNY", r.dueCountCNY);
      await expectTestId("overdue-count", "1");
      await expectTestId("suspended-count", "1");
      await expectRenewalRow("Overdue renewals", r.overdue);
      await expectRenewalRow("Suspended for non-payment", r.suspended);
      // The saved card's charge for the overdue invoice, declined.
      await expectRows(1, "Saved-card charges");
      const charge = rows("Saved-card charges").first();
      await charge.getByRole("link", { name: r.charge.orderId, exact: true }).waitFor();
      const cells = charge.locator(":scope > td");
      const got = [];
      for (const i of [0, 2, 3, 4]) got.push(await textOf(cells.nth(i)));
      sameJSON(got, [r.charge.made, r.charge.invoiceId.slice(0, 8), "due day", r.charge.outcome], "the saved-card charge");
      const file = await shot("renewals");
      if (fx.docsScreenshots) copyFileSync(file, join(fx.docsScreenshots, "renewals.png"));
    });

    await step("the overdue order's page: its next period invoiced and unpaid, nothing to extend", async () => {
      await rows("Overdue renewals").getByRole("link", { name: r.overdue.orderId, exact: true }).click();
      await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
      await settled();
      await expectTestId("order-status", "active");
      await expectRows(2, "Service periods");
      const second = rows("Service periods").nth(1);
      await expectText(second, "unpaid");
      const invoice = await second.locator("code").getAttribute("title");
      if (invoice !== r.overdue.invoiceId) throw new Error(`the unpaid period names invoice ${invoice}, want ${r.overdue.invoiceId}`);
      await expectText(page.getByRole("region", { name: "Actions" }), "Period 2 is invoiced and not paid");
      await expectAbsent(page.getByRole("form", { name: "Extend the paid period" }), "the extend form of an order whose next period is unpaid");
      await shot("order-renewal-overdue");
    });

    await step("the unpaid period's invoice: numbered in its year's series, one line for the period", async () => {
      await rows("Service periods").nth(1).getByRole("link").click();
      await page.getByRole("heading", { name: "Invoice", level: 1 }).waitFor();
      await settled();
      const number = await textOf(page.getByTestId("invoice-number"));
      if (!/^INV-\d{4}-\d{6}$/.test(number)) throw new Error(`the invoice's number is ${number}, want INV-<year>-<6 digits>`);
      await expectRows(1, "Lines of this invoice");
      const line = rows("Lines of this invoice").first();
      await expectText(line, r.overdue.amountDue);
      await expectText(line, "Renewal of");
      const amount = await textOf(page.getByTestId("invoice-amount"));
      if (amount !== r.overdue.amountDue) throw new Error(`the invoice's amount shows ${amount}, want ${r.overdue.amountDue}`);
      await shot("invoice-lines");
    });

    await step(
      "a service suspended for non-payment is not resumed by hand: the service's refusal is shown",
      async () => {
        await nav("Renewals");
        await rows("Suspended for non-payment").getByRole("link", { name: r.suspended.orderId, exact: true }).click();
        await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
        await settled();
        await expectTestId("order-status", "suspended");
        await expectText(page.getByTestId("suspend-reason"), "overdue");
        const resume = page.getByRole("form", { name: "Resume", exact: true });
        await resume.getByLabel("Reason").fill("the customer promised to pay (e2e)");
        await resume.getByRole("button", { name: "Resume", exact: true }).click();
        await resume.getByRole("alert").filter({ hasText: "Not possible now:" }).filter({ hasText: "paying the invoice resumes it" }).waitFor();
        await expectTestId("order-status", "suspended");
        await shot("order-suspended-overdue");
      },
      { allow: [["/billing.order.OrderService/ResumeOrder", "failed_precondition"]] },
    );

    await step("a monthly order's page: its paid period and paid-until", async () => {
      await page.goto(`${base}orders/${r.order.id}`);
      await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
      await settled();
      await expectTestId("order-status", "active");
      await expectTestId("paid-until", r.order.paidUntil);
      await expectTestId("renews", "yes");
      const periods = await cellTexts(page.getByRole("table", { name: "Service periods", exact: true }));
      sameJSON(periods, [["1", r.order.periodStart, r.order.paidUntil, "paid", r.order.periodStart, "—", "with the order"]], "the service periods");
      await shot("order-renewal");
    });

    await step("suspend with a reason, then resume", async () => {
      const suspend = page.getByRole("form", { name: "Suspend", exact: true });
      await suspend.getByLabel("Reason").fill(r.suspendReason);
      await suspend.getByRole("button", { name: "Suspend…" }).click();
      await confirmDialog("Suspend order");
      await page.getByTestId("order-status").filter({ hasText: "suspended" }).waitFor();
      await settled();
      await expectText(page.getByTestId("suspend-reason"), "by an admin");
      await expectAbsent(page.getByRole("form", { name: "Suspend", exact: true }), "the suspend form of a suspended order");
      await hideToast();
      await shot("order-suspended-by-admin");
      const resume = page.getByRole("form", { name: "Resume", exact: true });
      await resume.getByLabel("Reason").fill(r.resumeReason);
      await resume.getByRole("button", { name: "Resume", exact: true }).click();
      await page.getByTestId("order-status").filter({ hasText: /^active$/ }).waitFor();
      await settled();
      await expectAbsent(page.getByTestId("suspend-reason"), "the suspension reason of an active order");
    });

    await step("extend the paid period to a time in the admin's time zone", async () => {
      const extend = page.getByRole("form", { name: "Extend the paid period" });
      await expectText(extend, "UTC");
      await extend.getByLabel("New end").fill(r.extendTo);
      await extend.getByLabel("Reason").fill(r.extendReason);
      await extend.getByRole("button", { name: "Extend", exact: true }).click();
      await page.getByTestId("paid-until").filter({ hasText: r.extendedUntil }).waitFor();
      await settled();
      const periods = await cellTexts(page.getByRole("table", { name: "Service periods", exact: true }));
      if (periods.length !== 1 || periods[0][2] !== r.extendedUntil) throw new Error(`the periods after the extension: ${JSON.stringify(periods)}`);
    });

    await step("change plan now: the proration quoted before confirming, then the pending change cancelled", async () => {
      const form = page.getByRole("form", { name: "Change plan", exact: true });
      await form.getByLabel("Product").selectOption(r.planProductId);
      await form.getByLabel("When").selectOption("now");
      await form.getByRole("button", { name: "Change plan…" }).click();
      const dlg = page.getByRole("dialog");
      await dlg.waitFor();
      // The quote (ChangeOrderPlan with dry_run): nothing has changed yet.
      const quote = (await dlg.getByTestId("plan-quote").textContent())?.trim() ?? "";
      if (!/^\d+\.\d{2} CNY$/.test(quote) || quote === "0.00 CNY") throw new Error(`the quoted proration: ${JSON.stringify(quote)}`);
      await expectAbsent(page.getByTestId("pending-plan-change"), "a pending change before confirming");
      await dlg.getByRole("button", { name: "Change plan", exact: true }).click();
      await dlg.waitFor({ state: "detached" });
      const pending = page.getByTestId("pending-plan-change");
      await pending.waitFor();
      await settled();
      const billed = (await pending.getByTestId("pending-plan-amount").textContent())?.trim() ?? "";
      if (!/^\d+\.\d{2} CNY$/.test(billed)) throw new Error(`the pending change's proration: ${JSON.stringify(billed)}`);
      await expectAbsent(page.getByRole("form", { name: "Change plan", exact: true }), "the change form beside a pending change");
      await hideToast();
      await shot("order-plan-change-pending");
      await pending.getByRole("button", { name: "Cancel plan change…" }).click();
      await confirmDialog("Cancel plan change");
      await page.getByRole("form", { name: "Change plan", exact: true }).waitFor();
      await settled();
      await expectAbsent(page.getByTestId("pending-plan-change"), "the cancelled change");
    });

    await step("card renewals: the saved card's charging turned off", async () => {
      await expectTestId("auto-charge", "on");
      await page.getByRole("button", { name: "Turn card charging off" }).click();
      await page.getByTestId("auto-charge").filter({ hasText: /^off$/ }).waitFor();
      await page.getByRole("button", { name: "Turn card charging on" }).waitFor();
      await hideToast();
    });

    await step("turn the renewal off: nothing falls due any more", async () => {
      await page.getByRole("button", { name: "Turn renewal off" }).click();
      await page.getByTestId("renews").filter({ hasText: /^no$/ }).waitFor();
      await settled();
      await page.getByRole("button", { name: "Turn renewal on" }).waitFor();
      await hideToast();
      await shot("order-renewal-off");
      await nav("Renewals");
      await page.getByText("Nothing renews in the next 30 days.").waitFor();
      await expectTestId("overdue-count", "1");
      await expectTestId("suspended-count", "1");
      await shot("renewals-after");
    });

    await step("end the service now: the unused share quoted before confirming", async () => {
      await page.goto(`${base}orders/${r.order.id}`);
      await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
      await settled();
      const end = page.getByRole("form", { name: "End service now" });
      await end.getByLabel("Credit").selectOption("none");
      await end.getByRole("button", { name: "End service now…" }).click();
      const dlg = page.getByRole("dialog");
      await dlg.waitFor();
      // The quote (EndService with dry_run): nothing has changed yet.
      const unused = (await dlg.getByTestId("end-unused").textContent())?.trim() ?? "";
      if (!/^\d+\.\d{2} [A-Z]{3}$/.test(unused)) throw new Error(`the quoted unused share: ${JSON.stringify(unused)}`);
      await expectText(dlg.getByTestId("end-credited"), "0.00");
      await expectTestId("order-status", "active");
      await dlg.getByRole("button", { name: "End service", exact: true }).click();
      await dlg.waitFor({ state: "detached" });
      await page.getByTestId("order-status").filter({ hasText: /^terminated$/ }).waitFor();
      await settled();
      await expectAbsent(page.getByRole("form", { name: "End service now" }), "the end form of a terminated order");
    });

    await step("the customer's saved card removed, confirmed first", async () => {
      await page.goto(`${base}customers/${r.customerId}`);
      await page.getByRole("heading", { name: "Customer", level: 1 }).waitFor();
      const cards = page.getByRole("table", { name: /Saved cards of this customer/ });
      await cards.getByRole("button", { name: "Remove visa •••• 4242" }).click();
      const dlg = page.getByRole("dialog");
      await dlg.waitFor();
      await expectText(dlg, "This cannot be undone.");
      await dlg.getByRole("button", { name: "Remove card" }).click();
      await dlg.waitFor({ state: "detached" });
      await page.getByText("No saved card.").waitFor();
      await settled();
    });
  } else if (fx.mode === "totp") {
    // Two-factor sign-in needs no world: its steps come before the logout.
  } else {
    await step("dashboard shows the figures of the world the test made", async () => {
      await settled();
      const d = fx.dashboard;
      await expectTestId("today-count", String(d.todayPayments));
      await expectTestId("success-rate", d.successRate);
      await expectTestId("pending-count", String(d.pending));
      await expectTestId("refunds-pending", String(d.refundsPending));
      await expectTestId("oldest-pending-refund", "none waiting for an admin");
      // The transfer the test confirmed after its order was cancelled.
      const r = fx.returnedPayment;
      await expectMoneyToReturn(`${r.amount} ${r.currency}`, 1, r.capturedAt);
      await paymentLink(r.id).waitFor();
      await expectText(rows("Money to return").first(), "order cancelled");
      // Said once on the dashboard: its own block, not also a figure of the
      // Payments card (the table's hidden caption aside).
      const said = await page.evaluate(() =>
        [...document.querySelectorAll("main *")].filter(
          (el) => !el.closest(".visually-hidden") && [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim() === "Money to return"),
        ).length,
      );
      if (said !== 1) throw new Error(`"Money to return" is on the dashboard ${said} times, want once`);
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
      await expectRows(2);
      await paymentLink(fx.failedPayment.id).waitFor();
      await paymentLink(fx.returnedPayment.id).waitFor();

      await page.locator('select[name="interface"]').waitFor();
      await applyFilters({ Status: "", "Gateway interface": fx.gatewayInterfaceName });
      await page.waitForURL(/interface=/);
      await expectRows(3);
      await paymentLink(fx.pendingPayment.id).waitFor();
      await paymentLink(fx.failedPayment.id).waitFor();
      await paymentLink(fx.returnedPayment.id).waitFor();
      await expectAbsent(paymentLink(fx.paidPayment.id), "a balance payment under the bank-transfer interface");

      await applyFilters({ "Gateway interface": "", Status: "pending", Order: fx.paidPayment.orderId });
      await page.getByText("No payments match these filters.").waitFor();
      await applyFilters({ Status: "" });
      await expectRows(1);
      await paymentLink(fx.paidPayment.id).waitFor();
      // The transfer reference a bank-transfer customer quotes, in either case.
      await applyFilters({ Order: "", "Transfer reference": fx.pendingPayment.id.slice(0, 8).toLowerCase() });
      await page.waitForURL(/reference=/);
      await expectRows(1);
      await paymentLink(fx.pendingPayment.id).waitFor();
      await clearFilters();
      await expectRows(20);
    });

    await step("payments as CSV: the download is exactly the world's payments, with the list's filters", async () => {
      // Every payment of the range (this month, the browser's zone: UTC).
      const all = await downloadCSV("payments");
      expectCSV(all, fx.exportPayments, "payments.csv");
      // The list's filters go with it.
      await applyFilters({ Status: "failed" });
      await page.waitForURL(/status=failed/);
      const failed = await downloadCSV("payments");
      expectCSV(failed, fx.exportPayments.filter((p) => p.status === "failed"), "payments.csv of status failed");
      await applyFilters({ Status: "", Order: fx.paidPayment.orderId });
      expectCSV(await downloadCSV("payments"), fx.exportPayments.filter((p) => p.order_id === fx.paidPayment.orderId), "payments.csv of one order");
      await clearFilters();
      // A range that holds none of them: the header alone.
      const group = page.getByRole("group", { name: "Download payments as CSV" });
      await group.getByLabel("From").fill("2020-01-01");
      await group.getByLabel("To").fill("2020-01-31");
      expectCSV(await downloadCSV("payments"), [], "payments.csv of January 2020");
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
      // The dialog repeats the amount with its currency and where it goes:
      // a balance payment's refund goes to the customer's balance.
      const dlg = page.getByRole("dialog");
      await expectTestId("confirm-amount", `${fx.refundAmount} ${fx.paidPayment.currency}`);
      await expectText(dlg.getByTestId("confirm-destination"), `${fx.refundAmount} ${fx.paidPayment.currency} goes to the customer's balance`);
      await confirmDialog(`Refund ${fx.refundAmount} ${fx.paidPayment.currency} to the balance`);
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

    await step("audit log: the refunds' changes, before and after side by side", async () => {
      await page.getByRole("link", { name: "This payment in the audit log" }).click();
      await page.getByRole("heading", { name: "Audit log", level: 1 }).waitFor();
      await settled();
      const u = new URL(page.url());
      if (u.searchParams.get("entity_type") !== "payment" || u.searchParams.get("entity_id") !== fx.paidPayment.id) throw new Error(`the payment's link led to ${u.search}`);
      // Newest first: the full refund, 10.00 → 99.00 refunded, success → refunded.
      const refundsOnly = rows("Audit log").filter({ hasText: "payment.refund" });
      if ((await refundsOnly.count()) !== 2) throw new Error(`${await refundsOnly.count()} payment.refund entries, want 2`);
      const change = (row, field) => row.locator("table.change tbody tr").filter({ has: page.locator("th code", { hasText: new RegExp(`^${field}$`) }) });
      const side = async (row, field) => [await textOf(change(row, field).locator('td[data-side="before"]')), await textOf(change(row, field).locator('td[data-side="after"]'))];
      const full = refundsOnly.first();
      const rest = (Number(fx.paidPayment.amount) - Number(fx.refundAmount)).toFixed(2);
      const want = [
        [full, "refunded_amount", [fx.refundAmount, fx.paidPayment.amount]],
        [full, "status", ["success", "refunded"]],
        [refundsOnly.nth(1), "refunded_amount", ["0.00", fx.refundAmount]],
      ];
      for (const [row, field, pair] of want) {
        const got = await side(row, field);
        if (got.join(" → ") !== pair.join(" → ")) throw new Error(`${field}: ${got.join(" → ")}, want ${pair.join(" → ")} (the refund of ${rest} then)`);
      }
      await expectText(change(full, "refunded_amount").locator(".badge"), "money");
      // The admin who refunded, by name, not by a short id.
      await expectTestId("actor", `admin ${fx.username}`, full);
      // The money field comes first.
      const first = await textOf(full.locator("table.change tbody tr th code").first());
      if (first !== "refunded_amount") throw new Error(`the change starts with ${first}`);
      // The picture shows the log, not the toast of the refund.
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      await shot("audit-log");
      if (fx.docsScreenshots) copyFileSync(join(shots, "audit-log.png"), join(fx.docsScreenshots, "audit-log.png"));

      // Every admin's refunds, whatever the payment; then nobody's.
      await applyFilters({ Entity: "", "Entity id": "", Actor: "admin", Action: "payment.refund" });
      await page.waitForURL(/action=payment.refund/);
      await expectRows(2, "Audit log");
      await applyFilters({ Actor: "gateway" });
      await page.getByText("No audit entry matches these filters.").waitFor();
      await clearFilters();
      await rows("Audit log").first().waitFor();

      // The sign-ins (the test's own, at least one) hide on request, by the
      // service's filter: every page of the list loses them.
      await applyFilters({ Action: "admin.login" });
      await page.waitForURL(/action=admin.login/);
      const logins = await rows("Audit log").count();
      if (logins === 0) throw new Error("no admin.login entry in the audit log");
      await expectTestId("actor", `admin ${fx.username}`, rows("Audit log").first());
      await applyFilters({ "Hide sign-ins": true });
      await page.waitForURL(/hide_logins=1/);
      await page.getByText("No audit entry matches these filters.").waitFor();
      await applyFilters({ Action: "", "Hide sign-ins": true });
      await rows("Audit log").first().waitFor();
      const actions = await rows("Audit log").locator("td:nth-child(2) code").allInnerTexts();
      if (actions.some((a) => a === "admin.login" || a === "admin.logout")) throw new Error(`sign-ins shown while hidden: ${actions.join(", ")}`);
      await shot("audit-log-no-sign-ins");
      await clearFilters();
      await rows("Audit log").first().waitFor();
    });

    await step("confirm a bank transfer", async () => {
      await page.goto(`${base}payments/${fx.pendingPayment.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      const ref = fx.pendingPayment.id.slice(0, 8).toUpperCase();
      const shownRef = (await page.getByTestId("transfer-reference").textContent())?.trim();
      if (shownRef !== ref) throw new Error(`the transfer reference shows ${shownRef}, want ${ref}`);
      const form = page.getByRole("form", { name: "Confirm bank transfer" });
      await form.getByLabel("Bank statement reference").fill("E2E-TRANSFER-0001");
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
      // The money goes back through the interface, named, not to the balance.
      await expectTestId("confirm-amount", bankAmount);
      await expectText(dlg.getByTestId("confirm-destination"), `${bankAmount} goes back to the payer through the gateway interface “${fx.gatewayInterfaceName}”`);
      await confirmDialog(`Refund ${bankAmount} through ${fx.gatewayInterfaceName}`);
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
      // Who asked, by name: the signed-in admin.
      await expectText(row.getByTestId("requested-by"), fx.username);
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
      await expectText(newest.getByTestId("requested-by"), fx.username);
      // The docs' picture of the list with its CSV export (task ui-screenshot).
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      await page.getByRole("group", { name: "Download refunds as CSV" }).waitFor();
      const file = await shot("refunds");
      if (fx.docsScreenshots) copyFileSync(file, join(fx.docsScreenshots, "refunds.png"));
      // The CSV: the same refunds, oldest first, amounts exact.
      const listed = await rows("Refunds").locator("td:first-child code").evaluateAll((els) => els.map((e) => e.getAttribute("title")));
      const csv = await downloadCSV("refunds");
      const rest = (Number(fx.paidPayment.amount) - Number(fx.refundAmount)).toFixed(2);
      expectCSV(
        csv,
        [
          { id: listed[2], payment_id: fx.paidPayment.id, amount: fx.refundAmount, currency: "CNY", status: "succeeded" },
          { id: listed[1], payment_id: fx.paidPayment.id, amount: rest, currency: "CNY", status: "succeeded" },
          { id: listed[0], payment_id: bank.id, amount: bank.amount, currency: "CNY", status: "succeeded", reason: fx.manualRefund.reason, gateway_refund_id: fx.manualRefund.reference },
        ],
        "refunds.csv",
      );
      await applyFilters({ Status: "pending" });
      await page.waitForURL(/status=pending/);
      await page.getByText("No refund is waiting for its gateway or an admin.").waitFor();
      expectCSV(await downloadCSV("refunds"), [], "refunds.csv of status pending");
    });

    await step("payments after the refund and the confirmation", async () => {
      await nav("Payments");
      await paymentLink(fx.paidPayment.id).waitFor();
      // The picture shows the list, not the toast of the last action.
      await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
      const file = await shot("payments-after");
      // The README's picture (task ui-screenshot).
      if (fx.docsScreenshots) copyFileSync(file, join(fx.docsScreenshots, "payments.png"));
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
      const audit = await page.getByRole("link", { name: "This order in the audit log" }).getAttribute("href");
      if (!audit?.endsWith(`audit?entity_type=order&entity_id=${fx.paidPayment.orderId}`)) throw new Error(`the order's audit link is ${audit}`);
      await expectText(page.locator("section.card"), "one-time");
      await shot("order-detail");
    });

    await step("products: add a monthly product, change its price and cycle for its open orders too", async () => {
      await nav("Products");
      await expectText(rows(), "VPS S (e2e)");
      const add = page.getByRole("form", { name: "Add a product" });
      await add.getByLabel("Name").fill("VPS M monthly (e2e)");
      await add.getByLabel("Price").fill("20");
      await add.getByLabel("Currency").fill("CNY");
      await add.getByLabel("Billing cycle").selectOption("monthly");
      await add.getByRole("button", { name: "Add product" }).click();
      const row = () => rows().filter({ hasText: "VPS M monthly (e2e)" });
      await expectText(row(), "20.00 CNY");
      await expectText(row(), "monthly");
      await row().getByRole("button", { name: "Change VPS M monthly (e2e)" }).click();
      const change = page.getByRole("form", { name: "Change VPS M monthly (e2e)" });
      await change.getByLabel(/^Price/).fill("25.00");
      await change.getByLabel("Billing cycle").selectOption("quarterly");
      await change.getByLabel(/open orders/).check();
      await change.getByRole("button", { name: "Save" }).click();
      await expectText(row(), "25.00 CNY");
      await expectText(row(), "quarterly");
      await settled();
      await shot("products");
    });

    await step("customer: API key permission and balance", async () => {
      await nav("Customers");
      await page.getByRole("link", { name: fx.customerId }).waitFor();
      await shot("customers");
      await page.getByRole("link", { name: fx.customerId }).click();
      await settled();
      // The saved card: brand, last four digits and expiry only.
      const cards = page.getByRole("table", { name: /Saved cards of this customer/ });
      await expectText(cards.getByRole("row").nth(1), /visa •••• 4242\s*07\/2031/);
      const audit = await page.getByRole("link", { name: "This customer in the audit log" }).getAttribute("href");
      if (!audit?.endsWith(`audit?entity_type=customer&entity_id=${fx.customerId}`)) throw new Error(`the customer's audit link is ${audit}`);
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
      // The callback URL to enter in a gateway's dashboard: shown, and
      // copied as shown; the test pays through this interface afterwards
      // and compares it with the notify URL the gateway received.
      const shown = (await page.getByTestId("callback-url").textContent())?.trim() ?? "";
      const want = `/callbacks/${page.url().split("/").pop()}`;
      if (!/^https?:\/\//.test(shown) || !shown.endsWith(want)) throw new Error(`the callback URL shows ${shown}, want [server].public_url + ${want}`);
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(fx.baseURL).origin });
      await page.getByRole("button", { name: "Copy the callback URL" }).click();
      await page.getByText("Callback URL copied.").waitFor();
      const copied = await page.evaluate(() => navigator.clipboard.readText());
      if (copied !== shown) throw new Error(`the copy button copied ${copied}, the page shows ${shown}`);
      if (fx.callbackOut) writeFileSync(fx.callbackOut, copied);
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

    await step("gateway interfaces: a bank account's currencies are chosen from the service's, not typed as JSON", async () => {
      await nav("Gateway interfaces");
      await page.getByRole("link", { name: fx.gatewayInterfaceName }).click();
      await page.getByRole("heading", { name: "Gateway interface", level: 1 }).waitFor();
      await settled();
      const form = page.getByRole("form", { name: "Edit gateway interface" });
      const list = form.getByRole("group", { name: "Configuration" }).getByLabel("Currencies of the account");
      const shape = await list.evaluate((el) => ({ tag: el.tagName, multiple: el.multiple }));
      if (shape.tag !== "SELECT" || !shape.multiple) throw new Error(`the currencies are a ${JSON.stringify(shape)}, want a multi-select`);
      const picked = () => list.evaluate((el) => [...el.selectedOptions].map((o) => o.value));
      sameJSON(await list.evaluate((el) => [...el.options].map((o) => o.value)), fx.currencies, "the currencies offered");
      sameJSON(await picked(), [fx.currencies[0]], "the account's currencies");
      // None chosen: refused on the page, nothing sent.
      await list.selectOption([]);
      await form.getByRole("button", { name: "Save" }).click();
      await form.getByRole("alert").filter({ hasText: "choose at least one currency" }).waitFor();
      // Two chosen: saved, and shown so after a reload.
      await list.selectOption(fx.currencies);
      await form.getByRole("button", { name: "Save" }).click();
      await expectText(page.locator(".toast"), "Interface saved.");
      await page.reload();
      await page.getByRole("heading", { name: "Gateway interface", level: 1 }).waitFor();
      await settled();
      sameJSON(await picked(), fx.currencies, "the account's currencies after saving both");
      await form.screenshot({ path: join(shots, "gateway-bank-transfer-form.png") });
      // Back to the account's one currency for the steps that follow.
      await list.selectOption([fx.currencies[0]]);
      await form.getByRole("button", { name: "Save" }).click();
      await expectText(page.locator(".toast"), "Interface saved.");
      await page.reload();
      await settled();
      sameJSON(await picked(), [fx.currencies[0]], "the account's currency restored");
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

    await step("disputes: the nearest evidence deadline first, each linked to its payment, order and customer", async () => {
      await nav("Disputes");
      await page.getByRole("heading", { name: "Disputes", level: 1 }).waitFor();
      await rows().first().waitFor();
      const got = (await cellTexts(page.locator("main table").first())).map((r) => r[0]);
      sameJSON(got, fx.disputes, "the disputes in the queue's order");
      const first = rows().first();
      for (const href of [`payments/${fx.paidPayment.id}`, `orders/${fx.paidPayment.orderId}`, `customers/${fx.customerId}`]) {
        if ((await first.locator(`a[href$="${href}"]`).count()) !== 1) throw new Error(`the dispute's row links to no ${href}`);
      }
      await shot("disputes");
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
      await form.getByLabel("Bank statement reference").fill("E2E-LATE-TRANSFER-0001");
      await form.getByRole("button", { name: "Confirm bank transfer…" }).click();
      await expectText(page.getByRole("dialog"), "recorded as money to return");
      await confirmDialog("Confirm transfer");
      await page.getByTestId("captured-amount").waitFor();
      await settled();
      await expectTestId("payment-status", "failed");
      await expectText(page.getByTestId("captured-amount"), `${amount} still to return`);

      // The payment page offers the one-step credit too.
      await page.getByTestId("credit-to-balance").waitFor();

      // Two payments' money to return now, the oldest the one the test
      // confirmed.
      const r = fx.returnedPayment;
      const both = `${(Number(late.amount) + Number(r.amount)).toFixed(2)} ${late.currency}`;
      await expectMoneyToReturn(both, 2, r.capturedAt);
      const lateRow = rows("Money to return").filter({ has: paymentLink(late.id) });
      await expectText(lateRow, "order cancelled");
      await page.mouse.move(0, 0);
      const file = await shot("dashboard-money-to-return");
      // The docs' picture of the queue (task ui-screenshot).
      if (fx.docsScreenshots) copyFileSync(file, join(fx.docsScreenshots, "dashboard-money-to-return.png"));
      await page.getByRole("link", { name: "Show money to return" }).click();
      await page.waitForURL((u) => u.pathname === `${fx.adminPath}/payments` && u.searchParams.get("return") === "1");
      await settled();
      await expectRows(2);
      await expectText(rows().filter({ has: paymentLink(late.id) }), "money to return");
      await expectText(rows().filter({ has: paymentLink(r.id) }), "money to return");
      await shot("payments-money-to-return");

      // Returned in one step from the dashboard's queue.
      await nav("Dashboard");
      await rows("Money to return").filter({ has: paymentLink(late.id) }).getByRole("button", { name: `Credit ${amount} to balance: payment ${late.id}` }).click();
      await expectText(page.getByRole("dialog").getByTestId("confirm-destination"), `${amount} goes to the customer's balance`);
      await confirmDialog(`Credit ${amount} to the balance`);
      await rows("Money to return").filter({ has: paymentLink(late.id) }).waitFor({ state: "detached" });
      await page.goto(`${base}payments/${late.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await page.getByTestId("refunded-amount").filter({ hasText: amount }).waitFor();
      await settled();
      await expectTestId("payment-status", "failed");
      await expectText(rows("Refunds of this payment").first(), "balance");
      await expectAbsent(page.getByTestId("credit-to-balance"), "a credit button once everything went back");
      await shot("payment-credited-to-balance");
      // One left: the other, still the oldest.
      await expectMoneyToReturn(`${r.amount} ${r.currency}`, 1, r.capturedAt);
    });

    await step("captured money returned through the gateway from the dashboard, with a confirmation", async () => {
      const r = fx.returnedPayment;
      const amount = `${r.amount} ${r.currency}`;
      const row = rows("Money to return").filter({ has: paymentLink(r.id) });
      await row.getByRole("button", { name: `Return ${amount} through the gateway: payment ${r.id}` }).click();
      const dlg = page.getByRole("dialog");
      await dlg.getByRole("heading", { name: "Return through the gateway?" }).waitFor();
      await expectTestId("confirm-amount", amount);
      await expectText(dlg.getByTestId("confirm-destination"), `${amount} goes back to the payer through the gateway interface “${fx.gatewayInterfaceName}”`);
      // Cancelling sends nothing (one refund in all, below).
      await dlg.getByRole("button", { name: "Cancel" }).click();
      await dlg.waitFor({ state: "detached" });
      await row.getByRole("button", { name: `Return ${amount} through the gateway: payment ${r.id}` }).click();
      const refunded = page.waitForResponse((res) => new URL(res.url()).pathname.endsWith("/RefundPayment"));
      await confirmDialog(`Return ${amount}`);
      if ((await refunded).status() !== 200) throw new Error(`RefundPayment answered ${(await refunded).status()}`);
      // A bank transfer goes back by hand: the refund waits for the admin
      // to record it, and the money stays in the queue until then — which
      // the announcement says, rather than that the money went back.
      await expectText(page.getByRole("status"), "the refund is pending until its outcome is recorded");
      await settled();
      await openDashboard();
      await expectTestId("refunds-pending", "1");
      await expectTestId("money-to-return-count", "1");
      await expectRows(1, "Money to return");
      await page.goto(`${base}payments/${r.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      await expectTestId("refunded-amount", `0.00 ${r.currency}`);
      const refund = rows("Refunds of this payment").first();
      await expectText(refund.locator(".badge"), "pending");
      await expectText(refund, "refund manually");
      await refund.getByRole("button", { name: /^Record outcome/ }).click();
      const outcome = page.getByRole("dialog", { name: "Record the outcome of a refund" });
      await outcome.getByRole("radio", { name: /^Succeeded/ }).check();
      await outcome.getByLabel("Gateway or bank reference", { exact: true }).fill("E2E-SEPA-RETURN-0002");
      await outcome.getByLabel("Note", { exact: true }).fill("captured money sent back (e2e)");
      await outcome.getByRole("button", { name: "Record outcome…" }).click();
      await page.getByRole("dialog", { name: "Record the refund as succeeded?" }).getByRole("button", { name: "Record as succeeded" }).click();
      await outcome.waitFor({ state: "detached" });
      await page.getByTestId("refunded-amount").filter({ hasText: amount }).waitFor();
      await settled();
      await expectTestId("payment-status", "failed");
      await expectText(rows("Refunds of this payment").first().locator(".badge"), "succeeded");
      await shot("payment-returned-through-gateway");
      // The queue is empty: nothing waits to go back.
      await openDashboard();
      await expectTestId("money-to-return", "none");
      await page.getByText("No captured money waits to go back.").waitFor();
      await expectTestId("refunds-pending", "0");
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
        await expectText(row, "never");
        await page.evaluate(() => document.querySelector(".toast")?.classList.remove("visible"));
        await shot("api-keys");
        // A key expiring within 14 days is marked; its expiry is listed.
        const soon = await page.evaluate(() => new Date(Date.now() + 5 * 86_400_000).toISOString().slice(0, 10));
        await form.getByLabel("Name").fill("expiring soon");
        await form.getByLabel("Scope").selectOption("read");
        await form.getByLabel("Expires").fill(soon);
        await form.getByRole("button", { name: "Create key" }).click();
        await settled();
        await expectRows(2, "Admin API keys");
        const expiring = rows("Admin API keys").filter({ hasText: "expiring soon" });
        await expectText(expiring.getByTestId("key-expiry-soon"), "expires soon");
        if ((await rows("Admin API keys").filter({ hasText: fx.adminKeyName }).getByTestId("key-expiry-soon").count()) !== 0) {
          throw new Error("a key that never expires is marked as expiring");
        }
        await expiring.getByRole("button", { name: "Revoke expiring soon" }).click();
        await confirmDialog("Revoke key");
        await expiring.locator(".badge").filter({ hasText: "revoked" }).waitFor();
        await settled();
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
        const mine = rows("Admin API keys").filter({ hasText: fx.adminKeyName });
        await mine.getByRole("button", { name: `Revoke ${fx.adminKeyName}` }).click();
        await confirmDialog("Revoke key");
        await mine.locator(".badge").filter({ hasText: "revoked" }).waitFor();
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

  if (fx.mode === "totp") {
    await step(
      "two-factor sign-in: enrol with the QR code's secret and confirm with a code",
      async () => {
        const card = page.getByRole("region", { name: "Two-factor sign-in" });
        // Enrolling asks for the password: a wrong one starts nothing.
        await card.getByLabel("Password").fill("not-the-password");
        await card.getByRole("button", { name: "Set up two-factor sign-in" }).click();
        await card.getByRole("alert").filter({ hasText: "password is not right" }).waitFor();
        if (await card.getByTestId("totp-qr").count()) throw new Error("a wrong password started an enrolment");
        await card.getByLabel("Password").fill(fx.password);
        await card.getByRole("button", { name: "Set up two-factor sign-in" }).click();
        const qr = card.getByTestId("totp-qr");
        await qr.waitFor();
        const qrState = await qr.evaluate((img) => ({ src: img.getAttribute("src") ?? "", width: img.naturalWidth }));
        if (!qrState.src.startsWith("data:image/png;base64,") || qrState.width < 100) throw new Error(`the QR code is not a PNG shown: ${qrState.src.slice(0, 40)} ${qrState.width}`);
        const url = new URL(await textOf(card.getByTestId("totp-url")));
        if (url.protocol !== "otpauth:") throw new Error(`the page shows ${url}`);
        totpSecret = url.searchParams.get("secret") ?? "";
        if (totpSecret !== (await textOf(card.getByTestId("totp-secret")))) throw new Error("the secret shown differs from the URL's");
        const form = card.getByRole("form", { name: "Confirm two-factor sign-in" });
        await form.getByLabel("Code").fill("000000");
        await form.getByRole("button", { name: "Confirm" }).click();
        await card.getByRole("alert").waitFor();
        await form.getByLabel("Code").fill(await totpCode(0));
        await form.getByRole("button", { name: "Confirm" }).click();
        await card.getByTestId("totp-on").waitFor();
        const codes = await card.getByTestId("recovery-codes").locator("li").allInnerTexts();
        if (codes.length !== 10 || !codes.every((c) => /^[A-Z2-7]{4}(-[A-Z2-7]{4}){3}$/.test(c.trim()))) throw new Error(`recovery codes: ${JSON.stringify(codes)}`);
        // Required: it cannot be turned off from the console.
        if (await card.getByRole("form", { name: "Turn off two-factor sign-in" }).count()) throw new Error("2FA is offered to be turned off though it is required");
        await shot("totp-enrolled");
        // The confirmation's answer replaced the session: the console opens
        // where the admin asked to go before enrolling.
        await page.getByRole("button", { name: "Continue to the console" }).click();
        await page.getByRole("heading", { name: "Payments", level: 1 }).waitFor();
        await nav("Dashboard");
        await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
      },
      {
        allow: [
          ["/billing.identity.IdentityService/StartTotpEnrolment", "permission_denied"],
          ["/billing.identity.IdentityService/ConfirmTotpEnrolment", "invalid_argument"],
        ],
      },
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

  if (fx.mode === "totp") {
    await step(
      "two-factor sign-in: the password alone is not enough, the next code signs in",
      async () => {
        await page.getByLabel("Username").fill(fx.username);
        await page.getByLabel("Password").fill(fx.password);
        await page.getByRole("button", { name: "Log in" }).click();
        await page.getByRole("alert").filter({ hasText: "Enter your two-factor code." }).waitFor();
        // The confirmation spent this step's code: the next step's is
        // accepted (one step of drift either side).
        await page.getByLabel("Two-factor code").fill(await totpCode(1));
        await page.getByRole("button", { name: "Log in" }).click();
        await page.getByText("Signed in as").waitFor();
        // Enrolled: the console itself, not the enrolment.
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
    console.error(`failure screenshot: ${await shot("failure", { check: false })}`);
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
