// A list screen, written once: a heading, a filter form whose values live in
// the URL's query (so a filtered page can be bookmarked or reloaded), the
// list loaded for the URL's filters and page, a table or an empty state, and
// a pager. Every list of the console is one listScreen call that says only
// what differs: its filters, its call, its columns and its empty text.

import { h, replace, type Attrs, type Child } from "./dom";
import { listQuery, type ListQuery } from "./list_query";
import { setQuery, type RouteContext } from "./router";
import { empty, loadBlock, pager, pageTitle, table, type Column, type PageMetaLike } from "./ui";

/** One page of a list, and its paging figures when the call pages. */
export interface ListPage<T> {
  rows: T[];
  meta?: PageMetaLike;
}

export interface ListSpec<T> {
  /** The page heading. */
  title: string;
  /** Shown under the heading. */
  intro?: Child;
  /** What the list holds: "Loading payments…", and its failure. */
  what: string;
  /** The filter form. Each control's name is its query parameter. */
  filters?: {
    /** The form's accessible name: "Filter payments". */
    label: string;
    /** field(…) blocks around the controls (choice, textFilter, checkFilter). */
    fields: HTMLElement[];
    /** The submit button's text; "Apply" unless said. */
    submit?: string;
  };
  /** Shown above the filter form. */
  top?: Child;
  /** Shown between the filter form and the list. */
  aboveList?: Child;
  /** Shown below the list. */
  below?: Child;
  load(q: ListQuery, signal: AbortSignal): Promise<ListPage<T>>;
  /** The table's caption, read by screen readers. */
  caption: string | ((q: ListQuery) => string);
  /** The columns, or a call that gives them once the rows are loaded. */
  columns: Column<T>[] | (() => Promise<Column<T>[]>);
  /** What the list says when it has no row. */
  empty(q: ListQuery): string;
}

export interface ListScreen {
  element: HTMLElement;
  /** Loads the list again (after an action changed a row). */
  reload(): void;
}

export function listScreen<T>({ query, signal }: RouteContext, spec: ListSpec<T>): ListScreen {
  const form = spec.filters ? filterForm(spec.filters.label, spec.filters.fields, spec.filters.submit ?? "Apply") : null;
  const q = listQuery(query, form ? controls(form).map((c) => c.name) : []);
  const list = h("div");
  const reload = () =>
    replace(
      list,
      loadBlock(spec.what, async () => {
        const { rows, meta } = await spec.load(q, signal);
        if (rows.length === 0) {
          return empty(spec.empty(q));
        }
        const columns = Array.isArray(spec.columns) ? spec.columns : await spec.columns();
        const caption = typeof spec.caption === "string" ? spec.caption : spec.caption(q);
        return [table(caption, columns, rows), pager(meta, (p) => setQuery({ page: String(p) }))];
      }),
    );
  reload();
  const title = spec.intro ? pageTitle(spec.title, h("p", { class: "subtitle" }, spec.intro)) : pageTitle(spec.title);
  return { element: h("section", null, title, spec.top, form, spec.aboveList, list, spec.below), reload };
}

type Control = HTMLInputElement | HTMLSelectElement;

/** The form's named controls: its filters. */
function controls(form: HTMLFormElement): Control[] {
  return [...form.elements].filter((el): el is Control => (el instanceof HTMLInputElement || el instanceof HTMLSelectElement) && el.name !== "");
}

/** The filters as the URL holds them: a checked box is "1", a text is
 * trimmed, an empty value leaves the URL. */
function filterValues(form: HTMLFormElement): Record<string, string | undefined> {
  const values: Record<string, string | undefined> = {};
  for (const c of controls(form)) {
    values[c.name] = c instanceof HTMLInputElement && c.type === "checkbox" ? (c.checked ? "1" : undefined) : c.value.trim();
  }
  return values;
}

/** A search form: Apply writes its filters into the URL and goes back to the
 * first page; Clear removes them. The router then renders the screen again. */
function filterForm(label: string, fields: HTMLElement[], submit: string): HTMLFormElement {
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": label },
    fields,
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, submit), h("button", { type: "reset" }, "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery({ ...filterValues(form), page: undefined });
  });
  form.addEventListener("reset", (ev) => {
    ev.preventDefault();
    setQuery({ ...Object.fromEntries(controls(form).map((c) => [c.name, undefined])), page: undefined });
  });
  return form;
}

/** A select filter: "Any", then the values (the empty value is "Any"), each
 * shown as label gives it. A value the URL holds that is not among them
 * stays selected, so the form shows the filter the list applies. */
export function choice(query: URLSearchParams, name: string, values: readonly string[], label: (value: string) => string = (v) => v): HTMLSelectElement {
  const current = query.get(name) ?? "";
  const options = values.filter((v) => v !== "");
  return h(
    "select",
    { name },
    h("option", { value: "" }, "Any"),
    options.map((v) => h("option", { value: v, selected: current === v }, label(v))),
    current && !options.includes(current) ? h("option", { value: current, selected: true }, current) : null,
  );
}

/** A text filter holding the URL's value. */
export function textFilter(query: URLSearchParams, name: string, attrs: Attrs = {}): HTMLInputElement {
  return h("input", { name, value: query.get(name) ?? "", spellcheck: "false", ...attrs });
}

/** A checkbox filter: "1" in the URL while checked. */
export function checkFilter(query: URLSearchParams, name: string): HTMLInputElement {
  return h("input", { type: "checkbox", name, checked: query.get(name) === "1" });
}
