// A form generated from a plugin's config schema (JSON Schema, docs/plugins.md).
//
// Secrets — keys marked "x-secret" (or writeOnly, or format "password") — are
// write-only: the service reads them back as a mask, and the form never puts
// a stored value into an input. An untouched secret is left out of the
// submitted config, which the service answers by keeping the stored value.

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

import { h, uid } from "./dom";

/** What the service shows instead of a stored secret. */
export const secretMask = "********";

export interface PropertySchema {
  type?: string | string[];
  title?: string;
  description?: string;
  enum?: JsonValue[];
  default?: JsonValue;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  format?: string;
  writeOnly?: boolean;
  "x-secret"?: boolean;
  items?: PropertySchema;
  minItems?: number;
  uniqueItems?: boolean;
}

export interface FieldSpec {
  key: string;
  label: string;
  description: string;
  kind: "string" | "secret" | "enum" | "boolean" | "integer" | "number" | "currencies" | "json";
  required: boolean;
  schema: PropertySchema;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function isSecret(p: PropertySchema): boolean {
  return p["x-secret"] === true || p.writeOnly === true || p.format === "password";
}

function typeOf(p: PropertySchema): string {
  if (Array.isArray(p.type)) {
    return p.type.find((t) => t !== "null") ?? "string";
  }
  return p.type ?? (p.enum ? "enum" : "string");
}

const currencyCode = /^[A-Z]{3}$/;

/** Whether p is a list of ISO 4217 codes: an array of strings that are
 * three capital letters (the pattern ^[A-Z]{3}$, or an enum of such
 * codes), or the gateway key "currencies" (docs/plugins.md). */
export function isCurrencyList(key: string, p: PropertySchema): boolean {
  if (typeOf(p) !== "array" || !isObject(p.items as JsonValue)) return false;
  const items = p.items!;
  if (typeOf(items) !== "string" && !Array.isArray(items.enum)) return false;
  if (Array.isArray(items.enum)) return items.enum.length > 0 && items.enum.every((v) => typeof v === "string" && currencyCode.test(v));
  return items.pattern === "^[A-Z]{3}$" || key === "currencies";
}

/** The currencies a currency list offers: its enum when the schema has one,
 * else the service's ([billing].currencies); a value already chosen that is
 * not among them is kept, so saving never drops it unseen. */
export function currencyChoices(p: PropertySchema, configured: readonly string[], chosen: JsonValue | undefined): string[] {
  const offered = Array.isArray(p.items?.enum) ? p.items.enum.filter((v): v is string => typeof v === "string") : [...configured];
  const kept = Array.isArray(chosen) ? chosen.filter((v): v is string => typeof v === "string" && !offered.includes(v)) : [];
  return [...offered, ...kept];
}

/** The fields of an object schema, in the schema's key order. */
export function fieldsOf(schema: JsonObject | undefined): FieldSpec[] {
  if (!schema || !isObject(schema.properties)) {
    return [];
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : []);
  const out: FieldSpec[] = [];
  for (const [key, raw] of Object.entries(schema.properties)) {
    const p = (isObject(raw) ? raw : {}) as PropertySchema;
    let kind: FieldSpec["kind"];
    const t = typeOf(p);
    if (isSecret(p)) kind = "secret";
    else if (Array.isArray(p.enum)) kind = "enum";
    else if (t === "boolean") kind = "boolean";
    else if (t === "integer") kind = "integer";
    else if (t === "number") kind = "number";
    else if (t === "string") kind = "string";
    else if (isCurrencyList(key, p)) kind = "currencies";
    else kind = "json";
    out.push({ key, label: typeof p.title === "string" && p.title ? p.title : key, description: typeof p.description === "string" ? p.description : "", kind, required: required.has(key), schema: p });
  }
  return out;
}

export class FieldError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

interface Control {
  spec: FieldSpec;
  el: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  /** Whether a secret is already stored for this key. */
  stored: boolean;
}

export interface SchemaForm {
  element: HTMLElement;
  /** The config to submit; throws FieldError (and focuses the field) when a value is not acceptable. */
  value(): JsonObject;
}

function display(v: JsonValue | undefined): string {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v, null, 2);
}

/** A text that reads better in a text area: a template, or a value that is
 * long or spans lines. */
function long(spec: FieldSpec, cur: JsonValue | undefined): boolean {
  const v = display(cur);
  return /template|instructions|description|body/i.test(spec.key) || v.length > 60 || v.includes("\n");
}

export interface SchemaFormOptions {
  /** The service's currencies ([billing].currencies, GetMe): what a list of
   * currencies without an enum of its own offers. */
  currencies?: readonly string[];
}

/** Builds the form for schema, filled from current (the masked config the
 * service answered; absent for a new interface, then defaults apply). */
export function schemaForm(schema: JsonObject | undefined, current?: JsonObject, opts: SchemaFormOptions = {}): SchemaForm {
  const fields = fieldsOf(schema);
  const controls: Control[] = [];
  const rows: HTMLElement[] = [];
  for (const spec of fields) {
    const id = uid(`cfg-${spec.key}`);
    const has = current !== undefined && Object.prototype.hasOwnProperty.call(current, spec.key);
    const cur = has ? current![spec.key] : spec.schema.default;
    let el: Control["el"];
    let stored = false;
    switch (spec.kind) {
      case "secret":
        stored = has && cur !== "" && cur !== null;
        el = h("input", {
          id,
          type: "password",
          autocomplete: "new-password",
          spellcheck: "false",
          placeholder: stored ? "stored — leave empty to keep" : "",
          "data-secret": "true",
        });
        break;
      case "enum":
        el = h(
          "select",
          { id },
          spec.required ? null : h("option", { value: "" }, "—"),
          (spec.schema.enum ?? []).map((v) => h("option", { value: display(v), selected: display(v) === display(cur) }, display(v))),
        );
        break;
      case "boolean":
        el = h("input", { id, type: "checkbox" });
        (el as HTMLInputElement).checked = cur === true;
        break;
      case "integer":
      case "number":
        el = h("input", {
          id,
          type: "number",
          step: spec.kind === "integer" ? "1" : "any",
          min: spec.schema.minimum,
          max: spec.schema.maximum,
          value: display(cur),
        });
        break;
      case "currencies": {
        const chosen = Array.isArray(cur) ? cur : [];
        const choices = currencyChoices(spec.schema, opts.currencies ?? [], cur);
        el = h(
          "select",
          { id, multiple: true, size: Math.min(Math.max(choices.length, 2), 8), "data-kind": "currencies" },
          choices.map((c) => h("option", { value: c, selected: chosen.includes(c) }, c)),
        );
        break;
      }
      case "json":
        el = h("textarea", { id, spellcheck: "false", rows: 4 });
        el.value = display(cur);
        break;
      default:
        if (long(spec, cur)) {
          el = h("textarea", { id, spellcheck: "false", rows: 4, maxlength: spec.schema.maxLength });
          el.value = display(cur);
          break;
        }
        el = h("input", {
          id,
          type: spec.schema.format === "uri" ? "url" : spec.schema.format === "email" ? "email" : "text",
          spellcheck: "false",
          autocomplete: "off",
          maxlength: spec.schema.maxLength,
          value: display(cur),
          size: 40,
        });
    }
    if (spec.required) el.setAttribute("aria-required", "true");
    controls.push({ spec, el, stored });
    const hints: string[] = [];
    if (spec.description) hints.push(spec.description);
    if (spec.kind === "secret") hints.push(stored ? "Secret: stored and never shown; type a new value to replace it." : "Secret: never shown again once saved.");
    if (spec.kind === "json") hints.push("JSON.");
    if (spec.kind === "currencies") hints.push("Choose one or more (Ctrl or ⌘ and click for several).");
    const hintId = hints.length ? `${id}-hint` : undefined;
    if (hintId) el.setAttribute("aria-describedby", hintId);
    rows.push(
      h(
        "div",
        { class: spec.kind === "boolean" ? "field field-check" : "field" },
        h("label", { for: id }, spec.label, spec.required ? h("span", { "aria-hidden": "true" }, " *") : null),
        el,
        hintId ? h("small", { id: hintId, class: "hint" }, hints.join(" ")) : null,
      ),
    );
  }

  const element = h(
    "fieldset",
    { class: "schema-form" },
    h("legend", null, "Configuration"),
    rows.length ? rows : h("p", { class: "empty" }, "This plugin takes no configuration."),
  );

  function fail(c: Control, message: string): never {
    c.el.setAttribute("aria-invalid", "true");
    c.el.focus();
    throw new FieldError(c.spec.key, `${c.spec.label}: ${message}`);
  }

  return {
    element,
    value(): JsonObject {
      // Keys the schema does not describe are kept as they were.
      const out: JsonObject = {};
      if (current) {
        const known = new Set(fields.map((f) => f.key));
        for (const [k, v] of Object.entries(current)) {
          if (!known.has(k)) out[k] = v;
        }
      }
      for (const c of controls) {
        c.el.removeAttribute("aria-invalid");
        const { spec } = c;
        const raw = c.el instanceof HTMLInputElement && c.el.type === "checkbox" ? "" : c.el.value;
        switch (spec.kind) {
          case "boolean":
            out[spec.key] = (c.el as HTMLInputElement).checked;
            continue;
          case "secret":
            if (raw === "") {
              if (spec.required && !c.stored) fail(c, "is required.");
              continue; // omitted: the stored secret stays
            }
            if (raw === secretMask) fail(c, "type the new secret, not the mask.");
            break;
          case "integer":
          case "number": {
            if (raw.trim() === "") {
              if (spec.required) fail(c, "is required.");
              continue;
            }
            const n = Number(raw);
            if (!Number.isFinite(n) || (spec.kind === "integer" && !Number.isInteger(n))) fail(c, `must be ${spec.kind === "integer" ? "a whole number" : "a number"}.`);
            if (spec.schema.minimum !== undefined && n < spec.schema.minimum) fail(c, `must be at least ${spec.schema.minimum}.`);
            if (spec.schema.maximum !== undefined && n > spec.schema.maximum) fail(c, `must be at most ${spec.schema.maximum}.`);
            out[spec.key] = n;
            continue;
          }
          case "currencies": {
            const picked = [...(c.el as HTMLSelectElement).selectedOptions].map((o) => o.value);
            const least = Math.max(spec.schema.minItems ?? 0, spec.required ? 1 : 0);
            if (picked.length < least) fail(c, least === 1 ? "choose at least one currency." : `choose at least ${least} currencies.`);
            if (picked.length === 0) continue;
            out[spec.key] = picked;
            continue;
          }
          case "json": {
            if (raw.trim() === "") {
              if (spec.required) fail(c, "is required.");
              continue;
            }
            try {
              out[spec.key] = JSON.parse(raw) as JsonValue;
            } catch {
              fail(c, "is not valid JSON.");
            }
            continue;
          }
          case "enum": {
            if (raw === "") {
              if (spec.required) fail(c, "is required.");
              continue;
            }
            const v = (spec.schema.enum ?? []).find((e) => display(e) === raw);
            out[spec.key] = v === undefined ? raw : v;
            continue;
          }
          default:
            break;
        }
        // string and secret
        if (raw === "") {
          if (spec.required) fail(c, "is required.");
          continue;
        }
        if (spec.schema.minLength !== undefined && raw.length < spec.schema.minLength) fail(c, `needs at least ${spec.schema.minLength} characters.`);
        if (spec.schema.maxLength !== undefined && raw.length > spec.schema.maxLength) fail(c, `takes at most ${spec.schema.maxLength} characters.`);
        if (spec.schema.pattern) {
          let re: RegExp | null = null;
          try {
            re = new RegExp(spec.schema.pattern, "u");
          } catch {
            re = null; // a pattern the browser cannot read is left to the service
          }
          if (re && !re.test(raw)) fail(c, `does not match ${spec.schema.pattern}.`);
        }
        out[spec.key] = raw;
      }
      return out;
    },
  };
}
