import { describe, expect, it } from "vitest";

import { listQuery, pageOf } from "./list_query";

describe("pageOf", () => {
  it("reads a positive whole page, and 1 otherwise", () => {
    const of = (s: string) => pageOf(new URLSearchParams(s));
    expect(of("page=3")).toBe(3);
    expect(of("")).toBe(1);
    expect(of("page=0")).toBe(1);
    expect(of("page=-2")).toBe(1);
    expect(of("page=next")).toBe(1);
  });
});

describe("listQuery", () => {
  it("pages by 20 and reads an empty filter as unset", () => {
    const q = listQuery(new URLSearchParams("page=2&status=&order=7"), ["status", "order"]);
    expect(q.pagination).toEqual({ page: 2, pageSize: 20 });
    expect(q.get("status")).toBeUndefined();
    expect(q.get("order")).toBe("7");
    expect(q.filtered).toBe(true);
  });

  it("is not filtered by the page alone", () => {
    expect(listQuery(new URLSearchParams("page=4"), ["status"]).filtered).toBe(false);
    expect(listQuery(new URLSearchParams("status=failed"), []).filtered).toBe(false);
  });
});
