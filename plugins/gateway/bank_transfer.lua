-- Bank transfer: the buyer wires the money, quoting a reference; an admin
-- sees it arrive on the statement and confirms the payment
-- (ConfirmBankTransfer). No HTTP at all, so nothing here can fail remotely.
--
-- The reference is the first 8 characters of the payment id (a UUID),
-- uppercased: short enough to type into a banking app, unique enough for an
-- admin to match one statement line to one payment. It is also returned as
-- gateway_payment_id, so the admin can look the payment up by it.
--
-- Refunds are manual: refund() answers "pending" (the money has not moved
-- yet) and the message tells the admin what to send back; the refund row
-- stays pending until an admin records the transfer.
--
-- A bank account holds money in its own currency, which only the admin
-- knows: info() declares currencies = {"*"} and each interface names its
-- account's currencies in its config ("currencies", required). The service
-- offers an interface only for orders in those; create_payment refuses any
-- other too.

function version()
  return "1.1.0"
end

local DEFAULT_TEMPLATE = "Please transfer {amount} {currency} to {account_name}, " ..
    "{bank_name}, account {account_number}. Quote the reference {reference} " ..
    "so we can match your payment."

local function reference(payment_id)
  local compact = string.gsub(str(payment_id), "[^%w]", "")
  return string.upper(string.sub(compact, 1, 8))
end

-- fill replaces {name} placeholders; unknown ones are left as they are.
local function fill(template, values)
  return (string.gsub(template, "{(%w[%w_]*)}", function(name)
    local v = values[name]
    if v == nil then
      return nil
    end
    return v
  end))
end

local function missing(cfg)
  local out = {}
  for _, k in ipairs({ "bank_name", "account_name", "account_number" }) do
    if str(cfg[k]) == "" then
      out[#out + 1] = k
    end
  end
  return out
end

-- takes reports whether the account (cfg.currencies) takes currency.
local function takes(cfg, currency)
  if type(cfg.currencies) ~= "table" or currency == "" then
    return false
  end
  for _, c in ipairs(cfg.currencies) do
    if c == currency then
      return true
    end
  end
  return false
end

function info(config_json, input_json)
  return json_encode({
    display_name = "Bank transfer",
    description = "The customer transfers the amount with a reference; an admin confirms the payment when it arrives.",
    supports_query = false,
    supports_refund = true,
    currencies = { "*" },
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "bank_name", "account_name", "account_number", "currencies" },
    additionalProperties = false,
    properties = {
      bank_name = { type = "string", title = "Bank", minLength = 1 },
      account_name = { type = "string", title = "Account holder", minLength = 1 },
      account_number = { type = "string", title = "Account number / IBAN", minLength = 1 },
      currencies = {
        type = "array",
        title = "Currencies of the account",
        description = "ISO 4217 codes the account takes, e.g. [\"EUR\"]; orders in other currencies are not offered a transfer to it",
        items = { type = "string", pattern = "^[A-Z]{3}$" },
        minItems = 1,
        uniqueItems = true,
      },
      instructions_template = {
        type = "string",
        title = "Instructions",
        description = "Placeholders: {amount} {currency} {reference} {bank_name} {account_name} {account_number} {order_id}",
        default = DEFAULT_TEMPLATE,
      },
    },
  })
end

function create_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local m = missing(cfg)
  if #m > 0 then
    error("bank_transfer config: missing " .. table.concat(m, ", "))
  end
  local ref = reference(input.payment_id)
  if ref == "" then
    error("bank_transfer: payment_id is required")
  end
  if not takes(cfg, str(input.currency)) then
    error("bank_transfer: the account does not take " .. str(input.currency))
  end
  local template = str(cfg.instructions_template)
  if template == "" then
    template = DEFAULT_TEMPLATE
  end
  local text = fill(template, {
    amount = str(input.amount),
    currency = str(input.currency),
    reference = ref,
    bank_name = str(cfg.bank_name),
    account_name = str(cfg.account_name),
    account_number = str(cfg.account_number),
    order_id = str(input.order_id),
  })
  return json_encode({
    payment_url = "",
    qr_code = "",
    instructions = text,
    gateway_payment_id = ref,
  })
end

function query_payment(config_json, input_json)
  local input = json_table(input_json) or {}
  -- There is no one to ask: an admin confirms the transfer.
  return json_encode({
    status = "pending",
    gateway_payment_id = str(input.gateway_payment_id),
    gateway_tx_id = "",
    amount = "",
    paid_at = "",
  })
end

function parse_callback(config_json, input_json)
  return json_encode({ valid = false, reason = "bank transfers are confirmed by an admin" })
end

function refund(config_json, input_json)
  local input = json_table(input_json) or {}
  return json_encode({
    status = "pending",
    gateway_refund_id = "",
    message = "refund manually: transfer " .. str(input.amount) .. " " .. str(input.currency) ..
        " back to the payer (reference " .. reference(input.payment_id) .. "), then record it",
  })
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local m = missing(cfg)
  if #m > 0 then
    return json_encode({ ok = false, message = "missing " .. table.concat(m, ", ") })
  end
  if type(cfg.currencies) ~= "table" or #cfg.currencies == 0 then
    return json_encode({ ok = false, message = "missing currencies (the account's ISO 4217 codes)" })
  end
  local template = str(cfg.instructions_template)
  if template ~= "" and not string.find(template, "{reference}", 1, true) then
    return json_encode({ ok = false, message = "instructions_template must contain {reference}, or transfers cannot be matched" })
  end
  return json_encode({ ok = true, message = "bank details complete" })
end
