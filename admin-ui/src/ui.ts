// Building blocks every screen uses: headings, tables with loading and empty
// states, pagers, error and "not available" blocks, confirmation dialogs and a
// polite status region for results.

import { errorMessage, isAbort, isUnimplemented } from "./api";
import { h, replace, uid, type Child } from "./dom";
import { shortId } from "./format";
import { href } from "./router";

/** The page heading; focused after navigation so screen readers announce it. */
export function pageTitle(text: string, ...extra: Child[]): HTMLElement {
  return h("header", { class: "page-head" }, h("h1", { tabindex: -1, id: "page-title" }, text), ...extra);
}

export function link(rel: string, text: Child, attrs: Record<string, string> = {}): HTMLAnchorElement {
  return h("a", { href: href(rel), ...attrs }, text);
}

/** A link to a record showing the first 8 characters of its UUID. */
export function idLink(rel: string, id: string): HTMLAnchorElement {
  return link(rel, h("code", null, id.slice(0, 8)), { title: id, "aria-label": id });
}

export function errorBox(err: unknown): HTMLElement {
  return h("div", { class: "error", role: "alert" }, errorMessage(err));
}

/** Shown instead of a block whose API this server does not offer yet. */
export function notAvailable(what: string, detail?: string): HTMLElement {
  return h(
    "div",
    { class: "unavailable", role: "note" },
    h("strong", null, `${what}: not available`),
    h("p", null, detail ?? "This server does not offer this API yet."),
  );
}

/** Renders an error that ended a load: "not available" for an operation the
 * server lacks, the service's message otherwise. */
export function failure(what: string, err: unknown): HTMLElement {
  return isUnimplemented(err) ? notAvailable(what) : errorBox(err);
}

export function loading(what: string): HTMLElement {
  return h("p", { class: "loading", role: "status" }, `Loading ${what}…`);
}

export function empty(text: string): HTMLElement {
  return h("p", { class: "empty", role: "status" }, text);
}

export function badge(status: string): HTMLElement {
  return h("span", { class: `badge badge-${status.replace(/[^a-z_]/g, "")}` }, status || "—");
}

export interface Column<T> {
  header: string;
  cell: (row: T) => Child;
  /** Right-aligned numbers. */
  numeric?: boolean;
}

export function table<T>(caption: string, columns: Column<T>[], rows: T[]): HTMLElement {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      null,
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", null, h("tr", null, columns.map((c) => h("th", { scope: "col", class: c.numeric ? "num" : null }, c.header)))),
      h(
        "tbody",
        null,
        rows.map((row) => h("tr", null, columns.map((c) => h("td", { class: c.numeric ? "num" : null }, c.cell(row))))),
      ),
    ),
  );
}

export interface PageMetaLike {
  total: bigint;
  page: number;
  pageSize: number;
  totalPages: number;
}

export function pager(meta: PageMetaLike | undefined, go: (page: number) => void): HTMLElement | null {
  if (!meta) {
    return null;
  }
  const pages = Math.max(meta.totalPages, 1);
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    h("button", { type: "button", disabled: meta.page <= 1, onclick: () => go(meta.page - 1) }, "Previous"),
    h("span", { "aria-live": "polite" }, `Page ${meta.page} of ${pages} · ${meta.total} total`),
    h("button", { type: "button", disabled: meta.page >= pages, onclick: () => go(meta.page + 1) }, "Next"),
  );
}

/** A container that shows "Loading …", then what load renders, an empty
 * state, or the error. Aborted loads (navigation) render nothing. */
export function loadBlock(what: string, load: () => Promise<Child>): HTMLElement {
  const box = h("div", { class: "async", "aria-busy": "true" }, loading(what));
  load()
    .then((content) => {
      replace(box, content);
    })
    .catch((err: unknown) => {
      if (isAbort(err)) return;
      replace(box, failure(what.charAt(0).toUpperCase() + what.slice(1), err));
    })
    .finally(() => box.setAttribute("aria-busy", "false"));
  return box;
}

/** A labelled form control. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  const id = control.id || uid("f");
  control.id = id;
  let hintEl: HTMLElement | null = null;
  if (hint) {
    hintEl = h("small", { id: `${id}-hint`, class: "hint" }, hint);
    control.setAttribute("aria-describedby", hintEl.id);
  }
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

const statusRegion = h("div", { class: "toast", role: "status", "aria-live": "polite" });

export function statusRegionElement(): HTMLElement {
  return statusRegion;
}

let toastTimer: number | undefined;

/** Announces a result ("Refunded 10.00 CNY") politely and shows it briefly. */
export function announce(text: string): void {
  replace(statusRegion, text);
  statusRegion.classList.add("visible");
  window.clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => statusRegion.classList.remove("visible"), 6000);
}

export interface ConfirmOptions {
  title: string;
  body: Child;
  confirm: string;
  danger?: boolean;
}

/** A modal confirmation; resolves true only on the confirm button. Escape and
 * Cancel resolve false. Focus starts on Cancel, so Enter never confirms a
 * refund by accident, and returns to where it was. */
export function confirmDialog(opts: ConfirmOptions): Promise<boolean> {
  return new Promise((resolve) => {
    const titleId = uid("dlg");
    const back = document.activeElement as HTMLElement | null;
    const cancel = h("button", { type: "button", value: "cancel" }, "Cancel");
    const ok = h("button", { type: "button", class: opts.danger ? "danger" : "primary", value: "ok" }, opts.confirm);
    const dlg = h(
      "dialog",
      { "aria-labelledby": titleId, class: "confirm" },
      h("h2", { id: titleId }, opts.title),
      h("div", { class: "dialog-body" }, opts.body),
      h("div", { class: "actions" }, cancel, ok),
    );
    let answered = false;
    const finish = (yes: boolean) => {
      if (answered) return;
      answered = true;
      dlg.close();
      dlg.remove();
      back?.focus?.();
      resolve(yes);
    };
    cancel.addEventListener("click", () => finish(false));
    ok.addEventListener("click", () => finish(true));
    dlg.addEventListener("close", () => finish(false));
    document.body.appendChild(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

/** Runs action while button is disabled and marked busy; shows failures in
 * the given alert element and returns whether it succeeded. */
export async function busy(button: HTMLButtonElement, errors: HTMLElement, action: () => Promise<void>): Promise<boolean> {
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  replace(errors);
  try {
    await action();
    return true;
  } catch (err) {
    replace(errors, errorBox(err));
    return false;
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
}

/** A definition list of label → value pairs. */
export function facts(rows: [string, Child][]): HTMLElement {
  return h(
    "dl",
    { class: "facts" },
    rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v === "" ? "—" : v)]),
  );
}

/** A region whose children are errors: role=alert announces them. */
export function alertSlot(): HTMLElement {
  return h("div", { class: "alert-slot", "aria-live": "assertive" });
}

/** Who asked for a refund: the admin's name (the id on hover), the short
 * id of an admin the service could not name, or "system". */
export function requestedBy(r: { requestedBy: string; requestedByName: string }): Child {
  if (!r.requestedBy) return "system";
  if (r.requestedByName) return h("span", { title: r.requestedBy, "data-testid": "requested-by" }, r.requestedByName);
  return h("code", { title: r.requestedBy }, shortId(r.requestedBy));
}
