import { describe, expect, it } from "vitest";

import { changedFields } from "./audit_change";

describe("an audit entry's change, field by field", () => {
  it("lists only what differs, money first", () => {
    const before = JSON.stringify({ id: "p1", status: "success", refunded_amount: "0.00", amount: "12.30" });
    const after = JSON.stringify({ id: "p1", status: "refunded", refunded_amount: "12.30", amount: "12.30" });
    expect(changedFields(before, after)).toEqual([
      { field: "refunded_amount", before: "0.00", after: "12.30", money: true },
      { field: "status", before: "success", after: "refunded", money: false },
    ]);
  });

  it("shows a created entity's fields against nothing", () => {
    expect(changedFields("", JSON.stringify({ balance: "5.25", note: "goodwill" }))).toEqual([
      { field: "balance", before: "", after: "5.25", money: true },
      { field: "note", before: "", after: "goodwill", money: false },
    ]);
  });

  it("shows fields that appear or vanish, and non-string values as JSON", () => {
    expect(changedFields(JSON.stringify({ paid_at: "t", n: 1 }), JSON.stringify({ n: 2, source: "callback" }))).toEqual([
      { field: "n", before: "1", after: "2", money: false },
      { field: "source", before: "", after: "callback", money: false },
      { field: "paid_at", before: "t", after: "", money: false },
    ]);
  });

  it("takes a snapshot that is no object as one value", () => {
    expect(changedFields("not json", "[1]")).toEqual([{ field: "value", before: "not json", after: "[1]", money: false }]);
  });

  it("marks money by the field's name only", () => {
    const names = ["amount", "refunded_amount", "captured_amount", "balance", "credit_limit", "total_amount", "amounts_seen", "balanced"];
    const rows = changedFields("{}", JSON.stringify(Object.fromEntries(names.map((n) => [n, "1"]))));
    expect(rows.filter((r) => r.money).map((r) => r.field)).toEqual(["amount", "refunded_amount", "captured_amount", "balance", "credit_limit", "total_amount"]);
  });
});
