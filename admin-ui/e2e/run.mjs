// End-to-end test of the admin console: Debian's Chromium, driven by
// playwright-core, against a running paymentd. admin-ui/e2e_test.go starts
// the service on a fresh database, creates the world through the API (SQL
// only where no API exists), and runs this script with a fixture file:
//
//   node e2e/run.mjs fixture.json
//
// Steps that need an operation the server does not implement yet (it answers
// Unimplemented, which the console shows as "not available") are reported as
// SKIP with the reason, never as passed; every other step must pass. The last
// line sums up: "e2e: N passed, N skipped".

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

class Skip extends Error {}

function short(id) {
  return id.slice(0, 8);
}

async function step(name, fn) {
  const started = Date.now();
  try {
    await fn();
    results.push({ name, status: "ok" });
    console.log(`STEP ${name}: ok (${Date.now() - started} ms)`);
  } catch (err) {
    if (err instanceof Skip) {
      results.push({ name, status: "skip", reason: err.message });
      console.log(`STEP ${name}: SKIP (${err.message})`);
      return;
    }
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
page.on("response", (res) => {
  // Every file of the console must load; API answers (Connect errors) are
  // the screens' business.
  const url = new URL(res.url());
  if (url.pathname.startsWith(fx.adminPath + "/") && res.status() >= 400) {
    problems.push(`${res.status()} for ${url.pathname}`);
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

/** Waits until no list or block on the page is still loading. */
async function settled() {
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
}

async function nav(label) {
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: label, exact: true }).click();
  await settled();
}

/** Throws Skip when the scope shows that the server lacks the operation:
 * a "not available" block, or the message the console gives for a call
 * answered Unimplemented. Any other error is a failure. */
async function skipIfUnavailable(scope, what) {
  const na = scope.locator(".unavailable").or(scope.locator(".error").filter({ hasText: "Not available on this server" }));
  if (await na.count()) {
    throw new Skip(`${what}: ${(await na.first().innerText()).replace(/\s+/g, " ").trim()}`);
  }
}

async function login() {
  await page.getByLabel("Username").fill(fx.username);
  await page.getByLabel("Password").fill(fx.password);
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

let failed = false;
try {
  await step("open console", async () => {
    const res = await page.goto(base);
    if (!res || res.status() !== 200) throw new Error(`GET ${base}: ${res?.status()}`);
    const csp = res.headers()["content-security-policy"] ?? "";
    if (!csp.includes("default-src 'self'") || !csp.includes("frame-ancestors 'none'")) throw new Error(`CSP header missing or weak: ${csp}`);
    await page.getByRole("heading", { name: "paymentd admin" }).waitFor();
    await shot("login");
  });

  await step("login with a wrong password shows the error", async () => {
    await page.getByLabel("Username").fill(fx.username);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").filter({ hasText: "Wrong username or password." }).waitFor();
  });

  await step("login", async () => {
    await login();
    await page.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
  });

  if (fx.mode === "smoke") {
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
      await page.getByRole("link", { name: fx.paidPayment.id }).waitFor();
    });
  } else {
    await step("dashboard", async () => {
      await settled();
      const failedEvents = page.getByTestId("failed-events");
      if ((await failedEvents.count()) && Number.parseInt(await failedEvents.innerText(), 10) < 1) {
        throw new Error("the failed event of the fixture is not counted");
      }
      const today = Number.parseInt(await page.getByTestId("today-count").innerText(), 10);
      if (!(today >= 2)) throw new Error(`payments today: ${today}, want at least 2`);
      const pending = Number.parseInt(await page.getByTestId("pending-count").innerText(), 10);
      if (!(pending >= 1)) throw new Error(`pending payments: ${pending}, want at least 1`);
      await shot("dashboard");
    });

    await step("payments list shows the payment created through the API", async () => {
      await nav("Payments");
      await page.getByRole("heading", { name: "Payments", level: 1 }).waitFor();
      await page.getByRole("link", { name: fx.pendingPayment.id }).waitFor();
      await page.getByRole("link", { name: fx.paidPayment.id }).waitFor();
      await shot("payments");
    });

    await step("payments filter by status", async () => {
      await page.getByLabel("Status").selectOption("pending");
      await page.getByRole("button", { name: "Apply" }).click();
      await page.waitForURL(/status=pending/);
      await settled();
      await page.getByRole("link", { name: fx.pendingPayment.id }).waitFor();
      if (await page.getByRole("link", { name: fx.paidPayment.id }).count()) throw new Error("a successful payment is listed under status=pending");
      await page.getByLabel("Order").fill(fx.paidPayment.orderId);
      await page.getByRole("button", { name: "Apply" }).click();
      await settled();
      await page.getByText("No payments match these filters.").waitFor();
      await page.getByRole("button", { name: "Clear" }).click();
      await settled();
    });

    await step("payment detail shows its order", async () => {
      await page.getByRole("link", { name: fx.paidPayment.id }).click();
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      await expectText(page.locator("section.card"), fx.paidPayment.orderId);
      await shot("payment-detail");
    });

    await step("refund part of a payment", async () => {
      const form = page.getByRole("form", { name: "Refund" });
      if (!(await form.count())) throw new Error("no refund form on a successful payment");
      await form.getByLabel("Amount").fill(fx.refundAmount);
      await form.getByRole("button", { name: "Refund…" }).click();
      await confirmDialog(`Refund ${fx.refundAmount} ${fx.paidPayment.currency}`);
      // Either the service refunded (the page reloads the payment) or it
      // answered an error in the form's alert.
      const refunded = page.getByTestId("refunded-amount").filter({ hasText: `${fx.refundAmount} ${fx.paidPayment.currency}` });
      const alert = form.getByRole("alert");
      await Promise.race([refunded.waitFor(), alert.waitFor()]);
      if (await alert.count()) {
        await skipIfUnavailable(form, "RefundPayment");
        throw new Error(`refund failed: ${await alert.innerText()}`);
      }
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
      if (await page.getByRole("form", { name: "Refund" }).count()) throw new Error("a refunded payment still offers a refund");
    });

    await step("audit entry of the refund", async () => {
      const audit = page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Audit trail" }) });
      await skipIfUnavailable(audit, "audit trail");
      await expectText(audit.locator("tbody tr"), "payment.refund");
      const refunds = page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Refunds" }) });
      await skipIfUnavailable(refunds, "refund list");
      await expectText(refunds.locator("tbody tr"), `${fx.refundAmount} ${fx.paidPayment.currency}`);
    });

    await step("confirm a bank transfer", async () => {
      await page.goto(`${base}payments/${fx.pendingPayment.id}`);
      await page.getByRole("heading", { name: "Payment", level: 1 }).waitFor();
      await settled();
      const actions = page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Actions" }) });
      await skipIfUnavailable(actions, "ConfirmBankTransfer");
      const form = page.getByRole("form", { name: "Confirm bank transfer" });
      await form.getByLabel("Bank reference").fill("E2E-TRANSFER-0001");
      await form.getByRole("button", { name: "Confirm bank transfer…" }).click();
      await confirmDialog("Confirm transfer");
      const success = page.getByTestId("payment-status").filter({ hasText: "success" });
      const alert = form.getByRole("alert");
      await Promise.race([success.waitFor(), alert.waitFor()]);
      if (await alert.count()) {
        await skipIfUnavailable(form, "ConfirmBankTransfer");
        throw new Error(`confirmation failed: ${await alert.innerText()}`);
      }
      await shot("payment-transfer-confirmed");
    });

    await step("payments after the refund and the confirmation", async () => {
      await nav("Payments");
      await page.getByRole("link", { name: fx.paidPayment.id }).waitFor();
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
    });

    await step("orders", async () => {
      await nav("Orders");
      await page.getByRole("link", { name: fx.paidPayment.orderId }).waitFor();
      await shot("orders");
      await page.getByRole("link", { name: fx.paidPayment.orderId }).click();
      await page.getByRole("heading", { name: "Order", level: 1 }).waitFor();
      await settled();
      await page.getByRole("link", { name: fx.paidPayment.id }).waitFor();
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
      await shot("customer-detail");
    });

    await step("gateway interfaces", async () => {
      await nav("Gateway interfaces");
      await page.getByRole("heading", { name: "Gateway interfaces", level: 1 }).waitFor();
      await settled();
      await shot("gateways");
      await skipIfUnavailable(page.locator("main"), "GatewayAdminService");
      await page.getByRole("link", { name: fx.gatewayInterfaceName }).click();
      await settled();
      await page.getByRole("group", { name: "Configuration" }).waitFor();
      await shot("gateway-detail");
    });

    await step("plugins and reload", async () => {
      await nav("Plugins");
      await page.getByRole("heading", { name: "Plugins", level: 1 }).waitFor();
      await settled();
      await skipIfUnavailable(page.locator("main"), "GatewayAdminService.ListPlugins");
      await page.getByRole("button", { name: "Reload plugins" }).click();
      await page.getByRole("heading", { name: /^Reload: / }).or(page.getByRole("alert")).first().waitFor();
      await skipIfUnavailable(page.locator("main"), "GatewayAdminService.ReloadPlugins");
      await settled();
      await shot("plugins");
    });

    await step("retry a failed event", async () => {
      await nav("Events");
      await page.getByRole("heading", { name: "Events", level: 1 }).waitFor();
      await settled();
      await shot("events");
      await skipIfUnavailable(page.locator("main"), "EventAdminService");
      if (!fx.failedEventId) throw new Error("the fixture has no failed event");
      const row = page.locator("tbody tr").filter({ has: page.getByRole("link", { name: fx.failedEventId }) });
      await row.getByRole("button", { name: "Retry" }).click();
      await confirmDialog("Retry event");
      await page.waitForFunction(
        (id) => {
          const link = [...document.querySelectorAll("tbody tr a")].find((a) => a.getAttribute("aria-label") === id);
          const status = link?.closest("tr")?.querySelector(".badge")?.textContent;
          return status !== undefined && status !== "failed";
        },
        fx.failedEventId,
      );
      await shot("events-retried");
    });

    await step("notifications", async () => {
      await nav("Notifications");
      await page.getByRole("heading", { name: "Notifications", level: 1 }).waitFor();
      await settled();
      await shot("notifications");
      await skipIfUnavailable(page.locator("main"), "notifications API");
    });
  }

  await step("no console errors, CSP violations or missing files", async () => {
    if (problems.length) throw new Error(problems.join("\n"));
  });

  await step("logout", async () => {
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByText("You are logged out.").waitFor();
    await page.reload();
    await page.getByRole("button", { name: "Log in" }).waitFor();
  });
} catch (err) {
  failed = true;
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  try {
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
const skipped = results.filter((r) => r.status === "skip");
console.log(`e2e: ${passed} passed, ${skipped.length} skipped${failed ? ", 1 failed" : ""}`);
for (const s of skipped) console.log(`  skipped: ${s.name} — ${s.reason}`);
process.exit(failed ? 1 : 0);
