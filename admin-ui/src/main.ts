// The paymentd admin console: a login screen, then a shell with the sections'
// navigation and one screen at a time in <main>. See README.md in this folder.

import "./style.css";

import { Code, ConnectError } from "@connectrpc/connect";

import { errorMessage, identity, isAbort, onSessionEnded } from "./api";
import { h, replace } from "./dom";
import { currentRelative, match, onNavigate, sectionOf, start, type Route } from "./router";
import { announce, errorBox, link, pageTitle, statusRegionElement } from "./ui";
import { twoFactorCard } from "./views/account";
import { loginView } from "./views/login";
import { routes } from "./routes";

const root = document.getElementById("app")!;

interface Session {
  username: string;
}

let session: Session | null = null;
let current: AbortController | null = null;
let shell: { main: HTMLElement; nav: HTMLElement } | null = null;

function notFound(): Route {
  return {
    pattern: "*",
    render: () => h("section", null, pageTitle("Page not found"), h("p", null, "No screen lives at this address. ", link("", "Go to the dashboard"), ".")),
  };
}

/** The Log out button of the top bar. */
function logoutButton(): HTMLButtonElement {
  const logout = h("button", { type: "button", class: "link-button" }, "Log out");
  logout.addEventListener("click", async () => {
    logout.disabled = true;
    try {
      await identity.logout({});
    } catch (err) {
      // The session may already be gone; the console logs out either way.
      console.warn("logout:", errorMessage(err));
    }
    session = null;
    showLogin("You are logged out.");
  });
  return logout;
}

function buildShell(s: Session): { main: HTMLElement; nav: HTMLElement } {
  const nav = h(
    "nav",
    { class: "sections", "aria-label": "Sections" },
    h(
      "ul",
      null,
      routes.map((r) => (r.nav ? h("li", null, link(r.pattern, r.nav, { "data-section": r.pattern })) : null)),
    ),
  );
  const main = h("main", { id: "main", tabindex: -1 });
  replace(
    root,
    h("a", { class: "skip-link", href: "#main" }, "Skip to content"),
    h(
      "header",
      { class: "topbar" },
      link("", "paymentd admin", { class: "brand" }),
      h("span", { class: "who" }, "Signed in as ", h("strong", { "data-testid": "admin-name" }, s.username)),
      link("account", "Change password", { class: "account-link" }),
      logoutButton(),
    ),
    statusRegionElement(),
    h("div", { class: "layout" }, nav, main),
  );
  return { main, nav };
}

async function render(): Promise<void> {
  if (!session) {
    return;
  }
  if (!shell) {
    shell = buildShell(session);
  }
  current?.abort();
  const ctl = new AbortController();
  current = ctl;

  const rel = currentRelative();
  const m = match(routes, rel);
  const route = m?.route ?? notFound();
  for (const a of shell.nav.querySelectorAll<HTMLAnchorElement>("a[data-section]")) {
    if (a.dataset.section === sectionOf(route)) {
      a.setAttribute("aria-current", "page");
    } else {
      a.removeAttribute("aria-current");
    }
  }
  const main = shell.main;
  main.setAttribute("aria-busy", "true");
  try {
    const view = await route.render({ params: m?.params ?? {}, query: new URLSearchParams(window.location.search), signal: ctl.signal });
    if (ctl.signal.aborted) return;
    replace(main, view);
  } catch (err) {
    if (ctl.signal.aborted || isAbort(err)) return;
    replace(main, pageTitle("Something went wrong"), errorBox(err));
  } finally {
    if (!ctl.signal.aborted) main.setAttribute("aria-busy", "false");
  }
  const title = main.querySelector<HTMLElement>("h1");
  document.title = `${title?.textContent ?? "paymentd"} · paymentd admin`;
  // Move focus to the new heading on navigation (not on the first load,
  // where the browser's own focus handling is what users expect).
  if (document.activeElement && document.activeElement !== document.body) {
    title?.focus({ preventScroll: true });
  }
  window.scrollTo(0, 0);
}

function showLogin(message?: string): void {
  shell = null;
  current?.abort();
  replace(
    root,
    statusRegionElement(),
    loginView({
      message,
      onLoggedIn: () => void enter(),
    }),
  );
  document.title = "Log in · paymentd admin";
}

/** The one screen of an admin who must enrol two-factor sign-in first
 * ([admin].require_2fa): the service answers nothing else to the session
 * until the enrolment is confirmed, whose answer replaces the session. */
function showEnrolment(username: string): void {
  shell = null;
  current?.abort();
  const proceed = h("button", { type: "button", class: "primary" }, "Continue to the console");
  proceed.addEventListener("click", () => void enter());
  const next = h("div", { hidden: true, class: "enrolment-next" }, proceed);
  replace(
    root,
    h(
      "header",
      { class: "topbar" },
      h("span", { class: "brand" }, "paymentd admin"),
      h("span", { class: "who" }, "Signed in as ", h("strong", { "data-testid": "admin-name" }, username)),
      logoutButton(),
    ),
    statusRegionElement(),
    h(
      "main",
      { id: "main", tabindex: -1, class: "enrolment" },
      h(
        "section",
        null,
        pageTitle("Set up two-factor sign-in"),
        h(
          "p",
          { class: "notice", role: "status" },
          "This service requires two-factor sign-in for every admin. Set it up to go on: until then nothing else is open to your session.",
        ),
        twoFactorCard({
          onConfirmed: () => {
            next.hidden = false;
          },
        }),
        next,
      ),
    ),
  );
  document.title = "Set up two-factor sign-in · paymentd admin";
}

/** Asks the service who is signed in and shows the console, the
 * enrolment an admin must do first, or the login. */
async function enter(): Promise<void> {
  const me = await identity.getMe({});
  if (me.role !== "admin") {
    showLogin("This console is for admins. Log in with an admin account.");
    return;
  }
  if (me.totpRequired) {
    session = null;
    showEnrolment(me.username);
    return;
  }
  session = { username: me.username };
  shell = null;
  await render();
}

onSessionEnded(() => {
  if (session) {
    session = null;
    showLogin("Your session has ended. Please log in again.");
    announce("Your session has ended.");
  }
});

async function boot(): Promise<void> {
  start();
  onNavigate(() => void render());
  try {
    await enter();
  } catch (err) {
    // Unauthenticated is the normal "no session yet"; anything else (the
    // service is down, say) is worth saying above the form.
    showLogin(ConnectError.from(err).code === Code.Unauthenticated ? undefined : errorMessage(err));
  }
}

void boot();
