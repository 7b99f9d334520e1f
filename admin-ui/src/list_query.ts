// What a list screen reads from the URL: the page and the filters. Pure, so
// the unit tests hold it to the URL without a browser.

/** Rows on a page of every list. */
export const pageSize = 20;

/** The page a query asks for: its page parameter when that is a positive
 * whole number, else 1. */
export function pageOf(query: URLSearchParams): number {
  const n = Number.parseInt(query.get("page") ?? "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

/** The filters and the page a list is loaded for, as the URL has them. */
export interface ListQuery {
  page: number;
  /** The paging request of a list call: the page, pageSize rows. */
  pagination: { page: number; pageSize: number };
  /** A filter's value; undefined when the URL does not set it. */
  get(name: string): string | undefined;
  /** Whether the URL sets any of the form's filters. */
  filtered: boolean;
}

/** The list query of the URL's query string, for a form whose filters are
 * named filterNames. */
export function listQuery(query: URLSearchParams, filterNames: readonly string[]): ListQuery {
  const page = pageOf(query);
  const get = (name: string) => query.get(name) || undefined;
  return { page, pagination: { page, pageSize }, get, filtered: filterNames.some((n) => get(n) !== undefined) };
}
