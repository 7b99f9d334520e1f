-- Stripe gateway: hosted Checkout Sessions, signed webhooks, refunds.
--
-- Protocol (Stripe's REST API, form-encoded requests, JSON answers):
--   create  POST {api}/v1/checkout/sessions (mode=payment, one line item in
--           the currency's minor units, client_reference_id = our payment
--           id) → {"id": "cs_…", "url": "https://checkout.stripe.com/…"}
--   query   GET  {api}/v1/checkout/sessions/{id} → payment_status, status;
--           without a session id (a pending payment: the service stores
--           the gateway's id only when it settles), the PaymentIntent is
--           searched by metadata and its session listed
--   refund  POST {api}/v1/refunds (payment_intent, amount) → {"id": "re_…", "status"}
--   test    GET  {api}/v1/balance (authenticated, moves nothing)
--   notify  POST to notify_url, a JSON event signed in the Stripe-Signature
--           header: "t=<unix time>,v1=<hex HMAC-SHA256(secret, t.payload)>"
--           (several v1 entries while a secret is rolled); any 2xx stops it.
--           checkout.session.completed / async_payment_succeeded pay the
--           payment; async_payment_failed and expired fail it (final);
--           refund.updated / refund.failed complete or fail a refund that
--           Stripe answered pending; charge.dispute.created / updated /
--           closed report a dispute (chargeback) of a payment, named by its
--           PaymentIntent.
--
-- Every POST carries an Idempotency-Key naming what it does (the payment,
-- the refund), so Stripe answers a resend with its first answer and the
-- service may retry it safely.
--
-- Every request carries Stripe-Version: STRIPE_VERSION, the API version
-- this script reads and writes, so the account's default version (which an
-- admin may upgrade in the dashboard) never changes the shapes it gets.
-- Moving it (docs/plugins.md, "Stripe's API version"): read Stripe's
-- changelog between the two versions for the objects used here (Checkout
-- Session, PaymentIntent search, Refund, Event), set STRIPE_VERSION, bump
-- version(), run internal/plugintest's and internal/app's Stripe tests, and
-- set the webhook endpoint's API version in the dashboard to the same.
--
-- Money: the service sends "12.30"; Stripe counts in the currency's minor
-- unit (1230 cents, but 1230 yen for "1230.00" JPY, 12300 fils for
-- "12.30" BHD). The conversion below works on the digits, never on Lua
-- numbers (floats), and refuses an amount a currency cannot hold (12.30
-- JPY). info().currencies lists exactly the currencies whose minor unit
-- this script knows.

function version()
  return "1.3.0"
end

local DEFAULT_API = "https://api.stripe.com"

-- STRIPE_VERSION is the Stripe API version this script was written
-- against (stripe-go v84's APIVersion): sent as Stripe-Version with every
-- request. See the header comment for how to move it.
local STRIPE_VERSION = "2026-02-25.clover"

-- Tolerance of a webhook's timestamp against the service clock, in
-- seconds: Stripe's own libraries use 300.
local TOLERANCE = 300

-- EXPONENTS: the number of decimals Stripe uses for each currency this
-- script takes. Stripe's zero-decimal currencies count whole units; its
-- three-decimal ones count thousandths (and want the last digit 0).
-- HUF, ISK, TWD and UGX, which Stripe treats specially, are left out.
local EXPONENTS = {
  USD = 2, EUR = 2, GBP = 2, AUD = 2, CAD = 2, CHF = 2, CNY = 2, HKD = 2, SGD = 2,
  NZD = 2, SEK = 2, NOK = 2, DKK = 2, PLN = 2, CZK = 2, RON = 2, BGN = 2, MXN = 2,
  BRL = 2, INR = 2, MYR = 2, THB = 2, PHP = 2, IDR = 2, AED = 2, SAR = 2, ILS = 2,
  ZAR = 2, TRY = 2,
  JPY = 0, KRW = 0, VND = 0, CLP = 0,
  BHD = 3, JOD = 3, KWD = 3, OMR = 3, TND = 3,
}

-- The events a payment or a refund needs; every other event type is
-- acknowledged and ignored.
local HANDLED = {
  ["checkout.session.completed"] = true,
  ["checkout.session.async_payment_succeeded"] = true,
  ["checkout.session.async_payment_failed"] = true,
  ["checkout.session.expired"] = true,
}
local REFUND_EVENTS = {
  ["refund.updated"] = true,
  ["refund.failed"] = true,
}
local DISPUTE_EVENTS = {
  ["charge.dispute.created"] = true,
  ["charge.dispute.updated"] = true,
  ["charge.dispute.closed"] = true,
}

-- EVENTS is what the webhook endpoint must send, in the words of
-- admin_page and docs/plugins.md.
local EVENTS = "checkout.session.completed, checkout.session.async_payment_succeeded, "
  .. "checkout.session.async_payment_failed, checkout.session.expired, refund.updated, refund.failed, "
  .. "charge.dispute.created, charge.dispute.updated and charge.dispute.closed"

local ACK = '{"received":true}'

-- helpers -------------------------------------------------------------------

local find, sub, match, gsub, lower, upper = string.find, string.sub, string.match, string.gsub, string.lower, string.upper

local function api_base(cfg)
  local u = str(cfg.api_base)
  if u == "" then
    u = DEFAULT_API
  end
  return (gsub(u, "/+$", ""))
end

local function check_config(cfg)
  if not match(str(cfg.secret_key), "^[sr]k_[a-z]+_[%w]+$") then
    return "secret_key must be a Stripe secret or restricted key (sk_live_…, sk_test_…)"
  end
  if not match(str(cfg.webhook_secret), "^whsec_[%w]+$") then
    return "webhook_secret must be the endpoint's signing secret (whsec_…)"
  end
  local u = str(cfg.api_base)
  if u ~= "" and not match(u, "^https?://[^/%s]+") then
    return "api_base must be an http(s) URL"
  end
  return nil
end

-- to_minor is amount ("12.30") in currency's minor unit as a digit string,
-- or nil and why.
local function to_minor(amount, currency)
  local exp = EXPONENTS[currency]
  if exp == nil then
    return nil, "this Stripe plugin does not take " .. snippet(currency)
  end
  local int, frac = match(amount, "^(%d+)%.(%d%d)$")
  if int == nil then
    return nil, "amount " .. snippet(amount) .. " is not a decimal with two places"
  end
  local digits
  if exp == 0 then
    if frac ~= "00" then
      return nil, currency .. " has no minor unit: " .. amount .. " cannot be charged"
    end
    digits = int
  elseif exp == 2 then
    digits = int .. frac
  else
    digits = int .. frac .. "0"
  end
  digits = gsub(digits, "^0+", "")
  if digits == "" then
    digits = "0"
  end
  return digits
end

-- from_minor is Stripe's integer amount in currency back as the service's
-- decimal ("1230" USD → "12.30", "1230" JPY → "1230", "12340" BHD →
-- "12.34"); an amount the service cannot hold comes back as Stripe's
-- figure with all its decimals, which the service refuses as unreadable.
local function from_minor(n, currency)
  local digits = str(n)
  if not match(digits, "^%d+$") then
    return ""
  end
  local exp = EXPONENTS[upper(currency)] or 2
  if exp == 0 then
    return digits
  end
  while #digits <= exp do
    digits = "0" .. digits
  end
  local int, frac = sub(digits, 1, #digits - exp), sub(digits, #digits - exp + 1)
  if exp == 3 then
    if sub(frac, 3, 3) ~= "0" then
      return int .. "." .. frac
    end
    frac = sub(frac, 1, 2)
  end
  return int .. "." .. frac
end

local function headers(cfg, idempotency_key)
  local h = {
    ["Authorization"] = "Bearer " .. str(cfg.secret_key),
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Stripe-Version"] = STRIPE_VERSION,
  }
  if idempotency_key then
    h["Idempotency-Key"] = idempotency_key
  end
  return json_encode(h)
end

-- call runs one request; it returns the response table (status, body) or
-- nil and a message (transport error, open circuit).
local function call(fn, ...)
  local ok, raw = pcall(fn, ...)
  if not ok then
    return nil, tostring(raw)
  end
  local resp = json_table(raw) or {}
  if resp.status == nil then
    return nil, "no response"
  end
  return resp
end

local function post(cfg, path, body, idempotency_key, timeout_ms)
  return call(http_post_headers, api_base(cfg) .. path, body, headers(cfg, idempotency_key),
    json_encode({ timeout_ms = timeout_ms }))
end

local function get(cfg, path)
  return call(http_get, api_base(cfg) .. path, headers(cfg, nil))
end

-- stripe_error is Stripe's message of a refused request.
local function stripe_error(resp)
  local e = (json_table(resp.body) or {}).error
  if type(e) == "table" and str(e.message) ~= "" then
    return "HTTP " .. str(resp.status) .. ": " .. snippet(e.message), str(e.type)
  end
  return "HTTP " .. str(resp.status) .. ": " .. snippet(resp.body), ""
end

local function ok_status(resp)
  return resp.status >= 200 and resp.status <= 299
end

-- id_of is the id of a field Stripe may answer as an id or, expanded, as
-- the object.
local function id_of(v)
  if type(v) == "table" then
    return str(v.id)
  end
  return str(v)
end

local function session_path(id)
  return "/v1/checkout/sessions/" .. urlencode(id)
end

-- saved payment methods -----------------------------------------------------
--
-- A Checkout for a recurring order (create_payment's save_method) saves the
-- card for charges without the customer: a Stripe Customer per paymentd
-- customer (created once, with the service remembering its id), and
-- payment_intent_data[setup_future_usage]=off_session. When the session is
-- paid, parse_callback reads the PaymentIntent's payment method and hands
-- the service its references plus brand, last four digits and expiry —
-- never a card number, which Stripe never sends. charge_saved charges it
-- off-session (confirm=true, off_session=true) under the Idempotency-Key
-- of the attempt's payment; remove_saved detaches it.
--
-- These functions are kept apart from the rest of the script on purpose.

-- ensure_customer is the Stripe Customer of paymentd customer cid: the
-- one the service remembers, else a new one (one key per customer, so a
-- resend within Stripe's 24 h answers the same Customer).
local function ensure_customer(cfg, input)
  local known = str(input.gateway_customer_id)
  if known ~= "" then
    if not match(known, "^cus_[%w]+$") then
      error("stripe create: " .. snippet(known) .. " is not a Stripe Customer id")
    end
    return known
  end
  local cid = str(input.customer_id)
  if not match(cid, "^[%w%-]+$") then
    error("stripe create: customer_id is required to save a payment method")
  end
  local resp, err = post(cfg, "/v1/customers", form_encode({
    { "metadata[customer_id]", cid },
    { "description", "paymentd customer " .. cid },
  }), "paymentd-customer-" .. cid, 10000)
  if resp == nil then
    error("stripe create: customer: " .. err)
  end
  if not ok_status(resp) then
    error("stripe create: customer refused: " .. stripe_error(resp))
  end
  local c = json_table(resp.body) or {}
  if not match(str(c.id), "^cus_[%w]+$") then
    error("stripe create: the answer has no customer id: " .. snippet(resp.body))
  end
  return str(c.id)
end

-- save_fields adds to a Checkout Session's fields what saves its card,
-- when input.save_method; it returns the Stripe Customer ("" otherwise).
local function save_fields(cfg, input, fields)
  if input.save_method ~= true then
    return ""
  end
  local customer = ensure_customer(cfg, input)
  fields[#fields + 1] = { "customer", customer }
  fields[#fields + 1] = { "payment_intent_data[setup_future_usage]", "off_session" }
  fields[#fields + 1] = { "metadata[save_method]", "1" }
  return customer
end

-- saved_method_of is the payment method that paid session s, as the
-- service keeps it, or nil (logged) when Stripe does not say: the payment
-- is settled all the same, and the customer saves a card next time.
local function saved_method_of(cfg, s)
  local pi = id_of(s.payment_intent)
  local customer = id_of(s.customer)
  if pi == "" or customer == "" then
    log("warn", "stripe: a session to save a card from has no payment_intent or customer: " .. str(s.id))
    return nil
  end
  local resp, err = get(cfg, "/v1/payment_intents/" .. urlencode(pi) .. "?expand[]=payment_method")
  if resp == nil or not ok_status(resp) then
    log("warn", "stripe: cannot read the payment method of " .. pi .. ": " .. (err or stripe_error(resp)))
    return nil
  end
  local pm = (json_table(resp.body) or {}).payment_method
  if type(pm) ~= "table" or type(pm.card) ~= "table" or str(pm.id) == "" then
    log("warn", "stripe: " .. pi .. " was not paid by a card; nothing is saved")
    return nil
  end
  local card = pm.card
  local last4 = str(card.last4)
  local month, year = tonumber(card.exp_month), tonumber(card.exp_year)
  if not match(last4, "^%d%d%d%d$") or month == nil or year == nil then
    log("warn", "stripe: the card of " .. pi .. " has no last4 or expiry; nothing is saved")
    return nil
  end
  return {
    gateway_customer_id = customer,
    gateway_method_id = str(pm.id),
    brand = str(card.brand),
    last4 = last4,
    exp_month = math.floor(month),
    exp_year = math.floor(year),
  }
end

-- intent_report is what an off-session PaymentIntent says of its payment.
local function intent_report(pi)
  local st = str(pi.status)
  local status = "pending"
  if st == "succeeded" then
    status = "success"
  elseif st == "canceled" or st == "requires_payment_method" or st == "requires_action" then
    -- Off-session nobody can confirm it: declined, or authentication
    -- the customer must give by paying by hand.
    status = "failed"
  end
  local currency = str(pi.currency)
  local amount = from_minor(pi.amount_received ~= nil and pi.amount_received ~= 0 and pi.amount_received or pi.amount, currency)
  return {
    status = status,
    gateway_payment_id = str(pi.id),
    gateway_tx_id = str(pi.id),
    amount = amount,
    currency = upper(currency),
    paid_at = "",
  }
end

-- query_intent is query_payment for a charge_saved payment.
local function query_intent(cfg, pid, id)
  local resp, err = get(cfg, "/v1/payment_intents/" .. urlencode(id))
  if resp == nil then
    error("stripe query: " .. err)
  end
  if not ok_status(resp) then
    error("stripe query refused: " .. stripe_error(resp))
  end
  local pi = json_table(resp.body) or {}
  local meta = type(pi.metadata) == "table" and pi.metadata or {}
  if str(meta.payment_id) ~= "" and str(meta.payment_id) ~= pid then
    error("stripe query: PaymentIntent " .. snippet(id) .. " belongs to payment " .. snippet(str(meta.payment_id)))
  end
  return json_encode(intent_report(pi))
end

-- contract ------------------------------------------------------------------

function info(config_json, input_json)
  local codes = {}
  for code in pairs(EXPONENTS) do
    codes[#codes + 1] = code
  end
  table.sort(codes)
  return json_encode({
    display_name = "Stripe",
    description = "Cards and wallets through Stripe Checkout (hosted payment page), with signed webhooks and refunds.",
    supports_query = true,
    supports_refund = true,
    saves_payment_methods = true,
    currencies = codes,
  })
end

function config_schema(config_json, input_json)
  local codes = {}
  for code in pairs(EXPONENTS) do
    codes[#codes + 1] = code
  end
  table.sort(codes)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "secret_key", "webhook_secret" },
    additionalProperties = false,
    properties = {
      secret_key = {
        type = "string",
        title = "Secret key",
        description = "sk_live_… or sk_test_… (or a restricted key rk_… allowed to write Checkout Sessions and Refunds and to read PaymentIntents and the balance).",
        pattern = "^[sr]k_[a-z]+_[0-9A-Za-z]+$",
        ["x-secret"] = true,
      },
      webhook_secret = {
        type = "string",
        title = "Webhook signing secret",
        description = "whsec_… of the webhook endpoint pointed at this interface's callback URL.",
        pattern = "^whsec_[0-9A-Za-z]+$",
        ["x-secret"] = true,
      },
      api_base = {
        type = "string",
        title = "API base URL",
        description = "Leave empty for " .. DEFAULT_API .. ".",
        pattern = "^(https?://.+)?$",
        -- The secret key goes there: changing it needs the keys sent again.
        ["x-endpoint"] = true,
      },
      currencies = {
        type = "array",
        title = "Currencies",
        description = "Take only these, as a JSON array such as [\"USD\", \"EUR\"] (default: every currency the plugin supports).",
        items = { type = "string", enum = codes },
        uniqueItems = true,
      },
    },
  })
end

-- admin_page is the API contract's zero-parameter form: what an admin
-- must set up on Stripe's side.
function admin_page()
  return "Stripe: in the Stripe dashboard, add a webhook endpoint whose URL is this interface's "
    .. "callback URL ({public_url}/callbacks/{interface id}) and API version " .. STRIPE_VERSION .. ", with the events "
    .. EVENTS .. ", and paste its signing secret (whsec_…) here. "
    .. "Other events sent to it are acknowledged and ignored."
end

function create_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("stripe config: " .. bad)
  end
  local currency = upper(str(input.currency))
  local minor, why = to_minor(str(input.amount), currency)
  if minor == nil then
    error("stripe create: " .. why)
  end
  local pid = str(input.payment_id)
  if pid == "" then
    error("stripe create: payment_id is required")
  end
  local back = str(input.return_url)
  if back == "" then
    error("stripe create: return_url is required (Checkout sends the customer back there)")
  end
  local name = str(input.subject)
  if name == "" and str(input.order_id) ~= "" then
    name = "Order " .. str(input.order_id)
  elseif name == "" then
    name = "Invoice " .. str(input.invoice_id)
  end
  local fields = {
    { "mode", "payment" },
    { "line_items[0][quantity]", "1" },
    { "line_items[0][price_data][currency]", lower(currency) },
    { "line_items[0][price_data][unit_amount]", minor },
    { "line_items[0][price_data][product_data][name]", name },
    { "client_reference_id", pid },
    { "success_url", back },
    { "cancel_url", back },
    { "metadata[payment_id]", pid },
    { "metadata[order_id]", str(input.order_id) },
    { "metadata[invoice_id]", str(input.invoice_id) },
    { "payment_intent_data[metadata][payment_id]", pid },
    { "payment_intent_data[metadata][order_id]", str(input.order_id) },
  }
  local customer = save_fields(cfg, input, fields)
  local body = form_encode(fields)
  -- One key per payment: a resend, or a second CreatePayment of the same
  -- payment, gets the same session back instead of a second one.
  local resp, err = post(cfg, "/v1/checkout/sessions", body, "paymentd-payment-" .. pid, 10000)
  if resp == nil then
    error("stripe create: " .. err)
  end
  if not ok_status(resp) then
    error("stripe create refused: " .. stripe_error(resp))
  end
  local s = json_table(resp.body) or {}
  if str(s.id) == "" or str(s.url) == "" then
    error("stripe create: the answer has no session id or url: " .. snippet(resp.body))
  end
  return json_encode({
    payment_url = str(s.url),
    qr_code = "",
    instructions = "",
    gateway_payment_id = str(s.id),
    -- Only when saving: the service remembers it for the customer.
    gateway_customer_id = customer ~= "" and customer or nil,
  })
end

-- session_report is what a Checkout Session says of a payment: status,
-- amount, currency and ids, or nil and why.
local function session_report(s, status)
  local currency = str(s.currency)
  local amount = from_minor(s.amount_total, currency)
  if status == "success" and (amount == "" or currency == "") then
    return nil, "a paid session without amount_total or currency"
  end
  return {
    status = status,
    gateway_payment_id = str(s.id),
    gateway_tx_id = id_of(s.payment_intent),
    amount = amount,
    currency = upper(currency),
  }
end

-- find_session looks for the Checkout Session of payment pid when the
-- service has no session id: it stores the gateway's id only once a
-- payment settles (docs/decisions.md), so a pending payment whose webhook
-- was lost is found through its PaymentIntent, which carries our payment
-- id in its metadata (payment_intent_data) once the customer pays. Stripe's
-- search is eventually consistent (about a minute) and the reconciler
-- asks later than that. No PaymentIntent yet: nothing was paid (nil).
local function find_session(cfg, pid)
  if not match(pid, "^[%w%-]+$") then
    error("stripe query: payment id " .. snippet(pid) .. " cannot be searched for")
  end
  local q = "metadata['payment_id']:'" .. pid .. "'"
  local resp, err = get(cfg, "/v1/payment_intents/search?limit=10&query=" .. urlencode(q))
  if resp == nil then
    error("stripe query: " .. err)
  end
  if not ok_status(resp) then
    error("stripe query refused: " .. stripe_error(resp))
  end
  local found = (json_table(resp.body) or {}).data
  if type(found) ~= "table" then
    error("stripe query: not a search result: " .. snippet(resp.body))
  end
  for _, pi in ipairs(found) do
    local meta = type(pi) == "table" and type(pi.metadata) == "table" and pi.metadata or {}
    if str(meta.payment_id) == pid and str(pi.id) ~= "" and str(meta.off_session) == "1" then
      -- A charge of a saved method (charge_saved) has no session.
      return { intent = pi }
    end
    if str(meta.payment_id) == pid and str(pi.id) ~= "" then
      local r, lerr = get(cfg, "/v1/checkout/sessions?limit=1&payment_intent=" .. urlencode(str(pi.id)))
      if r == nil then
        error("stripe query: " .. lerr)
      end
      if not ok_status(r) then
        error("stripe query refused: " .. stripe_error(r))
      end
      local list = (json_table(r.body) or {}).data
      if type(list) == "table" and type(list[1]) == "table" and str(list[1].client_reference_id) == pid then
        return list[1]
      end
    end
  end
  return nil
end

function query_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("stripe config: " .. bad)
  end
  local pid = str(input.payment_id)
  local id = str(input.gateway_payment_id)
  if match(id, "^pi_") then
    return query_intent(cfg, pid, id)
  end
  local s
  if id == "" then
    s = find_session(cfg, pid)
    if s == nil then
      return json_encode({ status = "pending", gateway_payment_id = "", gateway_tx_id = "", amount = "", currency = "", paid_at = "" })
    end
    if s.intent ~= nil then
      return json_encode(intent_report(s.intent))
    end
  else
    local resp, err = get(cfg, session_path(id))
    if resp == nil then
      error("stripe query: " .. err)
    end
    if not ok_status(resp) then
      error("stripe query refused: " .. stripe_error(resp))
    end
    s = json_table(resp.body) or {}
    if str(s.id) ~= id then
      error("stripe query: the answer is not session " .. snippet(id))
    end
  end
  local ref = str(s.client_reference_id)
  if ref ~= "" and ref ~= pid then
    error("stripe query: session " .. str(s.id) .. " belongs to payment " .. snippet(ref))
  end
  local status = "pending"
  if str(s.payment_status) == "paid" then
    status = "success"
  elseif str(s.status) == "expired" then
    status = "failed"
  end
  local out, why = session_report(s, status)
  if out == nil then
    error("stripe query: " .. why)
  end
  out.paid_at = ""
  return json_encode(out)
end

-- signature_parts reads a Stripe-Signature header as Stripe's own
-- libraries do — comma-separated name=value pairs, nothing trimmed — but
-- refuses what they would read ambiguously: a pair without exactly one
-- "=", or a second timestamp. It returns the timestamp and every v1
-- signature (other schemes, such as v0, are skipped), or nil and why.
local function signature_parts(header)
  local t, v1 = nil, {}
  for item in string.gmatch(header .. ",", "([^,]*),") do
    local k, v = match(item, "^([^=]*)=([^=]*)$")
    if k == nil then
      return nil, nil, "malformed Stripe-Signature"
    end
    if k == "t" then
      if t ~= nil then
        return nil, nil, "Stripe-Signature has two timestamps"
      end
      t = v
    elseif k == "v1" then
      v1[#v1 + 1] = v
    end
  end
  return t, v1
end

-- verify checks a webhook's signature and age; it returns nil when the
-- payload is genuine and fresh, else why not.
local function verify(secret, header, payload)
  if header == "" then
    return "missing Stripe-Signature header"
  end
  local t, v1, bad = signature_parts(header)
  if bad then
    return bad
  end
  if t == nil or not match(t, "^[1-9]%d*$") or #t > 12 then
    return "Stripe-Signature has no timestamp"
  end
  if #v1 == 0 then
    return "Stripe-Signature has no v1 signature"
  end
  local expected = hmac_sha256(secret, t .. "." .. payload)
  local good = false
  for _, sig in ipairs(v1) do
    -- Every entry is compared (no early exit): while a secret is rolled
    -- Stripe signs with both.
    if constant_time_equals(expected, sig) then
      good = true
    end
  end
  if not good then
    return "bad signature"
  end
  -- Older than the tolerance is a replay; further ahead than it, a clock
  -- that cannot be trusted either way.
  local age = now_unix() - tonumber(t)
  if age > TOLERANCE or age < -TOLERANCE then
    return "timestamp outside the tolerance of " .. TOLERANCE .. " s"
  end
  return nil
end

-- refund_event reads refund.updated / refund.failed: a refund this
-- service asked for carries our refund id in its metadata (refund()), and
-- its status says what became of it. A refund made elsewhere (the
-- dashboard, another integration) is ignored.
local function refund_event(etype, r)
  if type(r) ~= "table" or str(r.object) ~= "refund" then
    return json_encode({ valid = false, reason = etype .. " without a refund" })
  end
  local meta = type(r.metadata) == "table" and r.metadata or {}
  local rid = str(meta.refund_id)
  if rid == "" then
    return json_encode({ valid = true, status = "ignored", reason = "a refund this service did not make", ack = ACK })
  end
  local st = str(r.status)
  local status
  if etype == "refund.failed" or st == "failed" or st == "canceled" then
    status = "failed"
  elseif st == "succeeded" then
    status = "succeeded"
  elseif st == "pending" or st == "requires_action" then
    status = "pending"
  else
    return json_encode({ valid = false, reason = "refund " .. snippet(str(r.id)) .. " has status " .. snippet(st) })
  end
  local message = ""
  if status == "failed" then
    message = "Stripe reports the refund " .. (st ~= "" and st or "failed")
    if str(r.failure_reason) ~= "" then
      message = message .. ": " .. snippet(str(r.failure_reason))
    end
  end
  local currency = str(r.currency)
  return json_encode({
    valid = true,
    reason = "",
    status = "refund",
    payment_id = str(meta.payment_id),
    refund = {
      refund_id = rid,
      status = status,
      gateway_refund_id = str(r.id),
      amount = from_minor(r.amount, currency),
      currency = upper(currency),
      message = message,
    },
    ack = ACK,
  })
end

-- dispute_event reads charge.dispute.*: Stripe's Dispute object names the
-- charge and the PaymentIntent (the payment's gateway_tx_id), not our
-- payment id; the service finds the payment by the PaymentIntent.
local function dispute_event(etype, d)
  if type(d) ~= "table" or str(d.object) ~= "dispute" then
    return json_encode({ valid = false, reason = etype .. " without a dispute" })
  end
  local id, st = str(d.id), str(d.status)
  if id == "" or st == "" then
    return json_encode({ valid = false, reason = etype .. " without a dispute id or status" })
  end
  local pi = id_of(d.payment_intent)
  if pi == "" then
    return json_encode({ valid = true, status = "ignored", reason = "a dispute of a charge without a PaymentIntent", ack = ACK })
  end
  local currency = str(d.currency)
  local amount = from_minor(d.amount, currency)
  if amount == nil or amount == "" then
    return json_encode({ valid = false, reason = "dispute " .. snippet(id) .. " has an unreadable amount" })
  end
  -- The evidence deadline, Unix seconds ("" when Stripe gives none).
  local due = ""
  if type(d.evidence_details) == "table" and match(str(d.evidence_details.due_by), "^%d+$") then
    due = str(d.evidence_details.due_by)
  end
  return json_encode({
    valid = true,
    reason = "",
    status = "dispute",
    payment_id = "",
    gateway_tx_id = pi,
    dispute = {
      dispute_id = id,
      status = st,
      amount = amount,
      currency = upper(currency),
      reason = str(d.reason),
      evidence_due_by = due,
    },
    ack = ACK,
  })
end

function parse_callback(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local function invalid(reason)
    return json_encode({ valid = false, reason = reason })
  end
  local function ignored(reason)
    return json_encode({ valid = true, status = "ignored", reason = reason, ack = ACK })
  end
  if check_config(cfg) then
    -- Without a secret anyone could sign; never verify against it.
    return invalid("gateway interface is not configured")
  end
  if str(input.method) ~= "POST" then
    return invalid("Stripe posts its events")
  end
  -- The signature is over the body's exact bytes.
  local payload = str(input.payload)
  if str(input.payload_base64) ~= "" then
    payload = base64_decode(input.payload_base64)
  end
  local hdrs = input.headers
  if type(hdrs) ~= "table" then
    hdrs = {}
  end
  local why = verify(str(cfg.webhook_secret), str(hdrs["stripe-signature"]), payload)
  if why then
    return invalid(why)
  end

  local event = json_table(payload) or {}
  local etype = str(event.type)
  if etype == "" then
    return invalid("the event has no type")
  end
  if REFUND_EVENTS[etype] then
    return refund_event(etype, type(event.data) == "table" and event.data.object or nil)
  end
  if DISPUTE_EVENTS[etype] then
    return dispute_event(etype, type(event.data) == "table" and event.data.object or nil)
  end
  if not HANDLED[etype] then
    return ignored("event type " .. snippet(etype))
  end
  local s = type(event.data) == "table" and event.data.object or nil
  if type(s) ~= "table" or str(s.object) ~= "checkout.session" then
    return invalid(etype .. " without a checkout session")
  end
  -- Sessions this service did not create (another integration on the
  -- same account, a payment link) carry no payment id of ours.
  local pid = str(s.client_reference_id)
  local meta = type(s.metadata) == "table" and s.metadata or {}
  if pid == "" then
    pid = str(meta.payment_id)
  end
  if pid == "" or str(s.mode) ~= "payment" then
    return ignored("a session this service did not create")
  end
  if str(meta.payment_id) ~= "" and str(meta.payment_id) ~= pid then
    return invalid("client_reference_id and metadata name different payments")
  end

  local status = "pending" -- completed but not yet paid (a bank debit)
  local final, reason = false, ""
  if etype == "checkout.session.async_payment_failed" then
    -- The bank debit behind a completed session failed: this session
    -- will never be paid.
    status, final, reason = "failed", true, "Stripe: the payment failed (checkout.session.async_payment_failed)"
  elseif etype == "checkout.session.expired" then
    -- Stripe expires a session that was never paid (24 h by default):
    -- nobody can pay it any more.
    status, final, reason = "failed", true, "Stripe: the Checkout Session expired unpaid (checkout.session.expired)"
  elseif str(s.payment_status) == "paid" then
    status = "success"
  end
  local out, bad = session_report(s, status)
  if out == nil then
    return invalid(bad)
  end
  out.valid = true
  out.reason = reason
  out.payment_id = pid
  out.ack = ACK
  if status == "success" and str(meta.save_method) == "1" then
    out.saved_method = saved_method_of(cfg, s)
  end
  if final then
    -- A final failure: the service fails the pending payment (a payment
    -- already paid stays paid, and the contradiction is recorded).
    out.final = true
  end
  return json_encode(out)
end

function refund(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("stripe config: " .. bad)
  end
  local currency = upper(str(input.currency))
  local minor, why = to_minor(str(input.amount), currency)
  if minor == nil then
    -- Nothing is sent: "failed" means no money moved.
    return json_encode({ status = "failed", gateway_refund_id = "", message = why })
  end
  local rid = str(input.refund_id)
  if rid == "" then
    error("stripe refund: refund_id is required")
  end
  -- The PaymentIntent is the callback's gateway_tx_id; a payment settled
  -- without one (by a status query on an old record) asks the session.
  local pi = str(input.gateway_tx_id)
  if pi == "" then
    local id = str(input.gateway_payment_id)
    if id == "" then
      return json_encode({ status = "failed", gateway_refund_id = "", message = "no Checkout Session is recorded for this payment" })
    end
    local resp, err = get(cfg, session_path(id))
    if resp == nil then
      error("stripe refund not sent: " .. err)
    end
    if not ok_status(resp) then
      error("stripe refund not sent: session " .. id .. ": " .. stripe_error(resp))
    end
    pi = id_of((json_table(resp.body) or {}).payment_intent)
    if pi == "" then
      return json_encode({ status = "failed", gateway_refund_id = "", message = "session " .. id .. " has no PaymentIntent" })
    end
  end
  local reason = str(input.reason)
  if #reason > 500 then
    reason = sub(reason, 1, 500)
  end
  local body = form_encode({
    { "payment_intent", pi },
    { "amount", minor },
    { "metadata[refund_id]", rid },
    { "metadata[payment_id]", str(input.payment_id) },
    { "metadata[reason]", reason },
  })
  -- One key per refund id: a resend is answered with the first refund.
  local resp, err = post(cfg, "/v1/refunds", body, "paymentd-refund-" .. rid, 15000)
  if resp == nil then
    if find(err, "circuit open", 1, true) or find(err, "connection refused", 1, true) then
      error("stripe refund not sent: " .. err)
    end
    return json_encode({ status = "unknown", gateway_refund_id = "",
      message = "refund outcome unknown (" .. err .. "); check the Stripe dashboard" })
  end
  if resp.status >= 500 or resp.status == 409 then
    return json_encode({ status = "unknown", gateway_refund_id = "",
      message = "refund outcome unknown (" .. stripe_error(resp) .. "); check the Stripe dashboard" })
  end
  if not ok_status(resp) then
    local msg, etype = stripe_error(resp)
    if etype == "idempotency_error" then
      -- The key was used before with other parameters: a refund of this
      -- id may exist.
      return json_encode({ status = "unknown", gateway_refund_id = "", message = msg })
    end
    return json_encode({ status = "failed", gateway_refund_id = "", message = msg })
  end
  local r = json_table(resp.body) or {}
  local st = str(r.status)
  local out = { gateway_refund_id = str(r.id), message = "" }
  if st == "succeeded" then
    out.status = "succeeded"
  elseif st == "pending" or st == "requires_action" then
    out.status = "pending"
    out.message = "Stripe reports the refund " .. st
  elseif st == "failed" or st == "canceled" then
    out.status = "failed"
    out.message = "Stripe reports the refund " .. st .. ": " .. str(r.failure_reason)
  else
    out.status = "unknown"
    out.message = "unexpected answer: " .. snippet(resp.body)
  end
  return json_encode(out)
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local bad = check_config(cfg)
  if bad then
    return json_encode({ ok = false, message = bad })
  end
  local resp, err = get(cfg, "/v1/balance")
  if resp == nil then
    return json_encode({ ok = false, message = "cannot reach Stripe: " .. err })
  end
  -- The answer's words stay out of the message (they go to the log): an
  -- admin may point api_base anywhere, and the test must not read other
  -- services' pages for them.
  if resp.status == 401 or resp.status == 403 then
    log("warn", "stripe test_config: the secret key was refused: " .. stripe_error(resp))
    return json_encode({ ok = false, message = "Stripe refused the secret key (HTTP " .. str(resp.status) .. "; its reason is in the service log)" })
  end
  if not ok_status(resp) then
    log("warn", "stripe test_config: " .. stripe_error(resp))
    return json_encode({ ok = false, message = "Stripe answered HTTP " .. str(resp.status) .. " (its reason is in the service log)" })
  end
  if (json_table(resp.body) or {}).object ~= "balance" then
    return json_encode({ ok = false, message = "not the Stripe API: the answer (HTTP " .. str(resp.status) .. ") is not a balance" })
  end
  local mode = "live"
  if match(str(cfg.secret_key), "^[sr]k_test_") then
    mode = "test"
  end
  return json_encode({ ok = true, message = "secret key accepted (" .. mode .. " mode)" })
end

-- charge_saved charges a saved card without the customer (issue 39): a
-- PaymentIntent confirmed off-session, under the attempt's payment id as
-- Idempotency-Key, so a resend — or a second leader after the first was
-- killed mid-call — gets the first charge back, never a second one.
function charge_saved(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("stripe config: " .. bad)
  end
  local pid = str(input.payment_id)
  if not match(pid, "^[%w%-]+$") then
    error("stripe charge: payment_id is required")
  end
  local customer, method = str(input.gateway_customer_id), str(input.gateway_method_id)
  if not match(customer, "^cus_[%w]+$") or not match(method, "^[%w_]+$") then
    return json_encode({ status = "failed", code = "no_method", message = "no Stripe customer and payment method to charge" })
  end
  local currency = upper(str(input.currency))
  local minor, why = to_minor(str(input.amount), currency)
  if minor == nil then
    return json_encode({ status = "failed", code = "amount", message = why })
  end
  local body = form_encode({
    { "amount", minor },
    { "currency", lower(currency) },
    { "customer", customer },
    { "payment_method", method },
    { "confirm", "true" },
    { "off_session", "true" },
    { "description", str(input.subject) },
    { "metadata[payment_id]", pid },
    { "metadata[invoice_id]", str(input.invoice_id) },
    { "metadata[order_id]", str(input.order_id) },
    { "metadata[off_session]", "1" },
  })
  local resp, err = post(cfg, "/v1/payment_intents", body, "paymentd-charge-" .. pid, 20000)
  if resp == nil then
    if find(err, "circuit open", 1, true) or find(err, "connection refused", 1, true) then
      return json_encode({ status = "failed", code = "not_sent", message = "not sent: " .. err })
    end
    -- It may have reached Stripe: the payment stays pending and a status
    -- query (or the same key again) says what it did.
    return json_encode({ status = "unknown", code = "", message = "outcome unknown: " .. err })
  end
  if resp.status >= 500 or resp.status == 409 then
    return json_encode({ status = "unknown", code = "", message = "outcome unknown: " .. stripe_error(resp) })
  end
  if not ok_status(resp) then
    local e = (json_table(resp.body) or {}).error
    e = type(e) == "table" and e or {}
    local code = str(e.code)
    if str(e.decline_code) ~= "" and code == "card_declined" then
      code = str(e.decline_code)
    end
    if str(e.type) == "idempotency_error" then
      return json_encode({ status = "unknown", code = "", message = stripe_error(resp) })
    end
    local msg = stripe_error(resp)
    if code == "" then
      code = "declined"
    end
    local pi = type(e.payment_intent) == "table" and str(e.payment_intent.id) or ""
    return json_encode({ status = "failed", code = code, message = msg, gateway_payment_id = pi, gateway_tx_id = pi })
  end
  local pi = json_table(resp.body) or {}
  if str(pi.id) == "" then
    return json_encode({ status = "unknown", code = "", message = "unexpected answer: " .. snippet(resp.body) })
  end
  local out = intent_report(pi)
  out.code = ""
  out.message = ""
  if str(pi.status) == "requires_action" then
    out.code = "authentication_required"
    out.message = "the card asks the customer to authenticate"
  elseif out.status == "failed" then
    out.code = "declined"
    out.message = "Stripe reports the PaymentIntent " .. str(pi.status)
  end
  return json_encode(out)
end

-- remove_saved detaches a saved card from its Stripe Customer: it can
-- never be charged again. One already gone is removed all the same.
function remove_saved(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("stripe config: " .. bad)
  end
  local method = str(input.gateway_method_id)
  if not match(method, "^[%w_]+$") then
    error("stripe remove: gateway_method_id is required")
  end
  local resp, err = post(cfg, "/v1/payment_methods/" .. urlencode(method) .. "/detach", "", nil, 10000)
  if resp == nil then
    error("stripe remove: " .. err)
  end
  if not ok_status(resp) then
    local e = (json_table(resp.body) or {}).error
    if type(e) == "table" and (str(e.code) == "resource_missing" or str(e.code) == "payment_method_not_attached") then
      return json_encode({ removed = true, message = "already detached" })
    end
    error("stripe remove refused: " .. stripe_error(resp))
  end
  return json_encode({ removed = true, message = "" })
end
