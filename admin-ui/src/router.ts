// A small History API router. Paths are relative to the console's base, which
// the server writes into <base href> ([server].admin_path + "/"), so the same
// build works under /admin, /ops/console or any other path; deep links such as
// <base>/payments/<id> survive a reload because the server answers every
// unknown path under the base with index.html.

export type Params = Record<string, string>;

export interface Route {
  /** Pattern relative to the base, e.g. "payments/:id"; "" is the dashboard. */
  pattern: string;
  /** The screen's label in the navigation; only a section's list has one. */
  nav?: string;
  render: (ctx: RouteContext) => Promise<Node> | Node;
}

/** The navigation section a route belongs to: its pattern's first segment
 * ("payments/:id" is under "payments"; the dashboard is ""). */
export function sectionOf(route: Route): string {
  return route.pattern.split("/")[0]!;
}

export interface RouteContext {
  params: Params;
  query: URLSearchParams;
  /** Aborted when the user navigates away, so late answers are dropped. */
  signal: AbortSignal;
}

export interface Match {
  route: Route;
  params: Params;
}

/** The base path, always ending with "/": "/admin/". */
export function basePath(): string {
  const p = new URL(document.baseURI).pathname;
  return p.endsWith("/") ? p : p + "/";
}

/** Turns a path relative to the base ("payments/1?page=2") into an absolute one. */
export function href(rel: string): string {
  return basePath() + rel.replace(/^\/+/, "");
}

/** The current path relative to the base, without leading or trailing slash. */
export function currentRelative(): string {
  const base = basePath();
  let p = window.location.pathname;
  if (p + "/" === base) {
    p = base;
  }
  if (!p.startsWith(base)) {
    return "";
  }
  return decodeURIComponent(p.slice(base.length)).replace(/\/+$/, "");
}

export function match(routes: Route[], rel: string): Match | null {
  const parts = rel === "" ? [] : rel.split("/");
  for (const route of routes) {
    const pat = route.pattern === "" ? [] : route.pattern.split("/");
    if (pat.length !== parts.length) {
      continue;
    }
    const params: Params = {};
    let ok = true;
    for (let i = 0; i < pat.length; i++) {
      const seg = pat[i]!;
      const got = parts[i]!;
      if (seg.startsWith(":")) {
        if (got === "") {
          ok = false;
          break;
        }
        params[seg.slice(1)] = got;
      } else if (seg !== got) {
        ok = false;
        break;
      }
    }
    if (ok) {
      return { route, params };
    }
  }
  return null;
}

type Listener = () => void;
const listeners = new Set<Listener>();

export function onNavigate(fn: Listener): void {
  listeners.add(fn);
}

function notify(): void {
  for (const fn of listeners) fn();
}

/** Goes to rel (relative to the base), adding a history entry unless replace. */
export function navigate(rel: string, opts: { replace?: boolean } = {}): void {
  const url = href(rel);
  if (opts.replace) {
    history.replaceState(null, "", url);
  } else {
    history.pushState(null, "", url);
  }
  notify();
}

/** Sets query parameters on the current path (filters, paging) and renders. */
export function setQuery(values: Record<string, string | undefined>, opts: { replace?: boolean } = {}): void {
  const q = new URLSearchParams(window.location.search);
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined || v === "") {
      q.delete(k);
    } else {
      q.set(k, v);
    }
  }
  const s = q.toString();
  navigate(currentRelative() + (s ? `?${s}` : ""), opts);
}

/** Intercepts clicks on same-origin links under the base so they navigate
 * without a page load; modified clicks (new tab) keep the browser's behaviour. */
export function start(): void {
  window.addEventListener("popstate", notify);
  document.addEventListener("click", (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) {
      return;
    }
    const a = (ev.target as Element | null)?.closest?.("a");
    if (!a || a.target || a.hasAttribute("download")) {
      return;
    }
    const url = new URL(a.href, document.baseURI);
    if (url.origin !== window.location.origin || !url.pathname.startsWith(basePath().replace(/\/$/, ""))) {
      return;
    }
    ev.preventDefault();
    const rel = url.pathname.slice(basePath().length) + url.search;
    navigate(rel);
  });
}
