// What an audit entry changed: the entity's snapshot before and after (JSON
// objects of its columns, never a secret), field by field, so the console can
// show the two side by side with the money fields marked.

import { h } from "./dom";

export interface FieldChange {
  field: string;
  before: string;
  after: string;
  /** The field holds money (an amount, a balance, a credit limit). */
  money: boolean;
}

/** Fields that hold money in the audit snapshots (payments, refunds,
 * orders, customers, balance transactions). */
const moneyField = /(^|_)(amount|balance|credit_limit|total)(_|$)/;

/** A snapshot's fields; a snapshot that is not a JSON object is one field,
 * "value". An empty text is no snapshot (created or removed). */
function fields(text: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!text) return out;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    out.set("value", text);
    return out;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    out.set("value", show(v));
    return out;
  }
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) out.set(k, show(x));
  return out;
}

function show(v: unknown): string {
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The fields that differ between before and after (absent on one side:
 * ""), money fields first, then in the snapshots' order. */
export function changedFields(before: string, after: string): FieldChange[] {
  const b = fields(before);
  const a = fields(after);
  const names = [...new Set([...a.keys(), ...b.keys()])];
  const out: FieldChange[] = [];
  for (const field of names) {
    const was = b.get(field) ?? "";
    const is = a.get(field) ?? "";
    if (was !== is) out.push({ field, before: was, after: is, money: moneyField.test(field) });
  }
  return out.sort((x, y) => Number(y.money) - Number(x.money));
}

/** Before and after side by side: a small table of the changed fields, the
 * money ones marked with a badge (not by colour alone); "—" without
 * snapshots or changes. */
export function changeTable(before: string, after: string, caption: string): HTMLElement | string {
  if (!before && !after) return "—";
  const rows = changedFields(before, after);
  if (rows.length === 0) return "no field changed";
  return h(
    "table",
    { class: "change" },
    h("caption", { class: "visually-hidden" }, caption),
    h("thead", null, h("tr", null, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, "After"))),
    h(
      "tbody",
      null,
      rows.map((r) =>
        h(
          "tr",
          { class: r.money ? "money-change" : null },
          h("th", { scope: "row" }, h("code", null, r.field), r.money ? [" ", h("span", { class: "badge badge-money" }, "money")] : null),
          h("td", { "data-side": "before" }, r.before === "" ? h("span", { class: "absent" }, before ? "(none)" : "(new)") : r.before),
          h("td", { "data-side": "after" }, r.after === "" ? h("span", { class: "absent" }, after ? "(none)" : "(removed)") : r.after),
        ),
      ),
    ),
  );
}
