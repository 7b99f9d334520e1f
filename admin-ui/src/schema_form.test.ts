import { describe, expect, it } from "vitest";

import { currencyChoices, fieldsOf, isCurrencyList, isSecret } from "./schema_form";

// The epay plugin's config schema (plugins/gateway/epay.lua).
const epay = {
  type: "object",
  required: ["api_url", "pid", "key"],
  properties: {
    api_url: { type: "string", title: "API URL", pattern: "^https?://" },
    pid: { type: "string", title: "Merchant ID (pid)", minLength: 1 },
    key: { type: "string", title: "Merchant key", minLength: 1, "x-secret": true },
    pay_type: { type: "string", title: "Payment type", enum: ["alipay", "wxpay", "qqpay"], default: "alipay" },
    sitename: { type: "string" },
    retries: { type: "integer", minimum: 0 },
    sandbox: { type: "boolean" },
    extra: { type: "object" },
  },
};

describe("fieldsOf", () => {
  it("reads every property in order with its kind and whether it is required", () => {
    const fields = fieldsOf(epay);
    expect(fields.map((f) => [f.key, f.kind, f.required])).toEqual([
      ["api_url", "string", true],
      ["pid", "string", true],
      ["key", "secret", true],
      ["pay_type", "enum", false],
      ["sitename", "string", false],
      ["retries", "integer", false],
      ["sandbox", "boolean", false],
      ["extra", "json", false],
    ]);
    expect(fields[0]!.label).toBe("API URL");
    expect(fields[4]!.label).toBe("sitename");
  });

  it("treats x-secret, writeOnly and password fields as secrets", () => {
    expect(isSecret({ "x-secret": true })).toBe(true);
    expect(isSecret({ writeOnly: true })).toBe(true);
    expect(isSecret({ format: "password" })).toBe(true);
    expect(isSecret({ type: "string" })).toBe(false);
  });

  it("makes the Stripe plugin's form: two write-only keys, an optional URL and currencies", () => {
    // plugins/gateway/stripe.lua's config_schema as the service hands it
    // over (json_encode sorts the keys).
    const stripe = {
      type: "object",
      required: ["secret_key", "webhook_secret"],
      additionalProperties: false,
      properties: {
        api_base: { type: "string", title: "API base URL", pattern: "^(https?://.+)?$" },
        currencies: { type: "array", title: "Currencies", items: { type: "string", enum: ["JPY", "USD"] }, uniqueItems: true },
        secret_key: { type: "string", title: "Secret key", pattern: "^[sr]k_[a-z]+_[0-9A-Za-z]+$", "x-secret": true },
        webhook_secret: { type: "string", title: "Webhook signing secret", pattern: "^whsec_[0-9A-Za-z]+$", "x-secret": true },
      },
    };
    expect(fieldsOf(stripe).map((f) => [f.key, f.kind, f.required, f.label])).toEqual([
      ["api_base", "string", false, "API base URL"],
      ["currencies", "currencies", false, "Currencies"],
      ["secret_key", "secret", true, "Secret key"],
      ["webhook_secret", "secret", true, "Webhook signing secret"],
    ]);
  });

  it("makes the bank transfer's currencies a choice of the service's currencies, not JSON", () => {
    // plugins/gateway/bank_transfer.lua's config_schema.
    const currencies = { type: "array", title: "Currencies of the account", items: { type: "string", pattern: "^[A-Z]{3}$" }, minItems: 1, uniqueItems: true };
    const bank = {
      type: "object",
      required: ["bank_name", "currencies"],
      properties: { bank_name: { type: "string", title: "Bank" }, currencies },
    };
    expect(fieldsOf(bank).map((f) => [f.key, f.kind, f.required])).toEqual([
      ["bank_name", "string", true],
      ["currencies", "currencies", true],
    ]);
    // The service's currencies are offered; a chosen one the service no
    // longer lists stays, so saving does not drop it unseen.
    expect(currencyChoices(currencies, ["CNY", "EUR"], ["EUR"])).toEqual(["CNY", "EUR"]);
    expect(currencyChoices(currencies, ["CNY", "EUR"], ["USD", "EUR"])).toEqual(["CNY", "EUR", "USD"]);
    expect(currencyChoices(currencies, [], undefined)).toEqual([]);
    // An enum of its own (Stripe's) is what it offers.
    expect(currencyChoices({ type: "array", items: { type: "string", enum: ["JPY", "USD"] } }, ["CNY"], [])).toEqual(["JPY", "USD"]);
  });

  it("keeps other arrays and objects as JSON", () => {
    expect(isCurrencyList("tags", { type: "array", items: { type: "string" } })).toBe(false);
    expect(isCurrencyList("methods", { type: "array", items: { type: "string", enum: ["card", "sepa_debit"] } })).toBe(false);
    expect(isCurrencyList("currencies", { type: "object" })).toBe(false);
    expect(isCurrencyList("accounts", { type: "array", items: { type: "string", pattern: "^[A-Z]{3}$" } })).toBe(true);
  });

  it("has no fields for a schema without properties", () => {
    expect(fieldsOf(undefined)).toEqual([]);
    expect(fieldsOf({ type: "object" })).toEqual([]);
  });
});
