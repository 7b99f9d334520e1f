-- epay v1 ("易支付") gateway.
--
-- Protocol (what a deployment of epay v1 speaks):
--   sign  = md5(k1=v1&k2=v2...&kN=vN .. key), lowercase hex, over every
--           parameter except `sign`, `sign_type` and empty values, names in
--           ascending order, values raw (never re-formatted: "1" stays "1").
--   create  POST {api_url}/mapi.php (form)  → {"code":1,"trade_no","payurl"|"qrcode"|"urlscheme"}
--   query   GET  {api_url}/api.php?act=order&pid&key&out_trade_no → {"code":1,"status":1|0,...}
--   refund  POST {api_url}/api.php?act=refund (form pid,key,out_trade_no,money) → code 1 or 0 = ok
--   notify  GET (or POST) to notify_url with the signed result; we answer "success".
--
-- Money is passed through as the strings given and received; this script
-- never does arithmetic on it. The payment id is epay's out_trade_no.
--
-- The protocol has no currency: every amount is yuan. info() declares
-- currencies = {"CNY"}, so the service neither offers nor creates a payment
-- in another currency through epay; create_payment and refund refuse one
-- too, should it ever get here (100.00 USD must never go out as money=100.00).

function version()
  return "1.3.0"
end

-- CURRENCY is the only currency epay v1 books.
local CURRENCY = "CNY"

-- helpers -------------------------------------------------------------------

local find, sub, byte = string.find, string.sub, string.byte

local function base_url(cfg)
  local u = str(cfg.api_url)
  return (string.gsub(u, "/+$", ""))
end

-- sign is the epay v1 MD5 signature of params (a table of strings): the
-- host's sign_string sorts the names and joins the raw k=v pairs.
local function sign(params, key)
  return md5(sign_string(params, "sign,sign_type") .. key)
end

-- same compares two signatures without stopping at the first difference.
local function same(a, b)
  if #a ~= #b then
    return false
  end
  local x, y = { byte(a, 1, -1) }, { byte(b, 1, -1) }
  local diff = 0
  for i = 1, #x do
    if x[i] ~= y[i] then
      diff = diff + 1
    end
  end
  return diff == 0
end

-- form_decode decodes a form-encoded string ("+" is a space; raises on a
-- malformed percent-encoding); most names and values have nothing to
-- decode and are returned as they are.
local function form_decode(s)
  if find(s, "%", 1, true) or find(s, "+", 1, true) then
    return urldecode(s)
  end
  return s
end

-- decode_pair form-decodes a name and its value.
local function decode_pair(k, v)
  return form_decode(k), form_decode(v)
end

-- request runs one host HTTP call; it returns the decoded response table or
-- nil and a message (transport error, open circuit, unparseable answer).
local function request(fn, ...)
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

local function check_config(cfg)
  local u = str(cfg.api_url)
  if not string.match(u, "^https?://[^/%s]+") then
    return "api_url must be an http(s) URL"
  end
  if str(cfg.pid) == "" then
    return "pid is required"
  end
  if str(cfg.key) == "" then
    return "key is required"
  end
  return nil
end

-- contract ------------------------------------------------------------------

function info(config_json, input_json)
  return json_encode({
    display_name = "易支付 (epay v1)",
    description = "Alipay, WeChat Pay and QQ Pay through an epay v1 merchant account (MD5 signing).",
    supports_query = true,
    supports_refund = true,
    currencies = { CURRENCY },
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "api_url", "pid", "key" },
    additionalProperties = false,
    properties = {
      api_url = {
        type = "string",
        title = "API URL",
        description = "Base URL of the epay deployment, e.g. https://pay.example.com/",
        pattern = "^https?://",
        -- The merchant key goes there: changing it needs the key sent again.
        ["x-endpoint"] = true,
      },
      pid = { type = "string", title = "Merchant ID (pid)", minLength = 1 },
      key = { type = "string", title = "Merchant key", minLength = 1, ["x-secret"] = true },
      pay_type = {
        type = "string",
        title = "Payment type",
        enum = { "alipay", "wxpay", "qqpay" },
        default = "alipay",
      },
      sitename = { type = "string", title = "Site name shown on the cashier page" },
    },
  })
end

function create_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("epay config: " .. bad)
  end
  if str(input.currency) ~= CURRENCY then
    error("epay takes " .. CURRENCY .. " only, not " .. snippet(input.currency))
  end
  local pay_type = str(cfg.pay_type)
  if pay_type == "" then
    pay_type = "alipay"
  end
  local name = str(input.subject)
  if name == "" then
    name = "Order " .. str(input.order_id)
  end
  local params = {
    pid = str(cfg.pid),
    type = pay_type,
    out_trade_no = str(input.payment_id),
    notify_url = str(input.notify_url),
    return_url = str(input.return_url),
    name = name,
    money = str(input.amount),
    clientip = str(input.client_ip),
    sitename = str(cfg.sitename),
  }
  params.sign = sign(params, str(cfg.key))
  params.sign_type = "MD5"

  -- No retry: a payment creation is never sent twice blindly.
  local resp, err = request(http_post, base_url(cfg) .. "/mapi.php", form_encode(params),
    "application/x-www-form-urlencoded", json_encode({ timeout_ms = 10000, retry = false }))
  if resp == nil then
    error("epay create: " .. err)
  end
  if resp.status < 200 or resp.status > 299 then
    error("epay create: HTTP " .. str(resp.status) .. ": " .. snippet(resp.body))
  end
  local body = json_table(resp.body) or {}
  if str(body.code) ~= "1" then
    local msg = str(body.msg)
    if msg == "" then
      msg = "unexpected answer: " .. snippet(resp.body)
    end
    error("epay create refused: " .. msg)
  end
  local out = {
    payment_url = str(body.payurl),
    qr_code = str(body.qrcode),
    instructions = "",
    gateway_payment_id = str(body.trade_no),
  }
  if out.payment_url == "" then
    out.payment_url = str(body.urlscheme)
  end
  if out.payment_url == "" and out.qr_code == "" then
    error("epay create: answer has neither payurl nor qrcode")
  end
  return json_encode(out)
end

-- endtime is "YYYY-MM-DD hh:mm:ss" in the deployment's time (China, +08:00).
local function rfc3339(t)
  local d, h = string.match(str(t), "^(%d%d%d%d%-%d%d%-%d%d)[ T](%d%d:%d%d:%d%d)$")
  if d == nil then
    return ""
  end
  return d .. "T" .. h .. "+08:00"
end

function query_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("epay config: " .. bad)
  end
  -- The key travels in the query string: that is the v1 API.
  local url = base_url(cfg) .. "/api.php?act=order&pid=" .. urlencode(str(cfg.pid)) ..
      "&key=" .. urlencode(str(cfg.key)) .. "&out_trade_no=" .. urlencode(str(input.payment_id))
  local resp, err = request(http_get, url, "{}")
  if resp == nil then
    error("epay query: " .. err)
  end
  if resp.status < 200 or resp.status > 299 then
    error("epay query: HTTP " .. str(resp.status))
  end
  local body = json_table(resp.body) or {}
  if str(body.code) ~= "1" then
    local msg = str(body.msg)
    if msg == "" then
      msg = "unexpected answer: " .. snippet(resp.body)
    end
    error("epay query refused: " .. msg)
  end
  local paid = str(body.status) == "1"
  local tx = str(body.api_trade_no)
  if tx == "" then
    tx = str(body.trade_no)
  end
  local out = {
    status = "pending",
    gateway_payment_id = str(body.trade_no),
    gateway_tx_id = "",
    amount = str(body.money),
    paid_at = "",
  }
  if paid then
    out.status = "success"
    out.gateway_tx_id = tx
    out.paid_at = rfc3339(body.endtime)
  end
  return json_encode(out)
end

function parse_callback(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local function invalid(reason)
    return json_encode({ valid = false, reason = reason })
  end
  if check_config(cfg) then
    -- With an empty key anyone could sign; never verify against it.
    return invalid("gateway interface is not configured")
  end
  local ct = string.lower(str(input.content_type))
  if str(input.method) == "POST" and ct ~= "" and not string.find(ct, "application/x-www-form-urlencoded", 1, true) then
    return invalid("unsupported content type")
  end
  -- One pass over the pairs as they travelled (percent-encoded). epay
  -- signs the decoded values — what a PHP merchant finds in $_GET/$_POST —
  -- so each key and value is form-decoded once, and nothing else: no
  -- trimming, no number formatting ("1" stays "1"). A pair without a name
  -- is no parameter (PHP drops it). A notification that repeats a name,
  -- as sent or once decoded (money=12.30&money=0.01) is ambiguous — PHP,
  -- which epay is written for, reads the last — so it is refused, whichever
  -- copy the signature covers.
  local payload = str(input.payload)
  local seen, p = {}, {}
  local pos, last = 1, #payload
  while pos <= last do
    local amp = find(payload, "&", pos, true) or (last + 1)
    if amp > pos then
      local pair = sub(payload, pos, amp - 1)
      local eq = find(pair, "=", 1, true)
      local k, v = pair, ""
      if eq then
        k, v = sub(pair, 1, eq - 1), sub(pair, eq + 1)
      end
      if seen[k] then
        return invalid("repeated parameter " .. k)
      end
      seen[k] = true
      if k ~= "" then
        local ok, dk, dv = pcall(decode_pair, k, v)
        if not ok then
          return invalid("malformed percent-encoding in payload")
        end
        if p[dk] ~= nil then
          return invalid("repeated parameter " .. dk)
        end
        p[dk] = dv
      end
    end
    pos = amp + 1
  end
  local got = string.lower(str(p.sign))
  if got == "" then
    return invalid("missing sign")
  end
  local st = str(p.sign_type)
  if st ~= "" and string.upper(st) ~= "MD5" then
    return invalid("unsupported sign_type")
  end
  if str(p.pid) ~= str(cfg.pid) then
    return invalid("pid does not match this merchant")
  end
  if not same(got, sign(p, str(cfg.key))) then
    return invalid("bad signature")
  end
  if str(p.out_trade_no) == "" or str(p.money) == "" then
    return invalid("missing out_trade_no or money")
  end
  local status = "pending"
  if str(p.trade_status) == "TRADE_SUCCESS" then
    status = "success"
  end
  local tx = str(p.api_trade_no)
  if tx == "" then
    tx = str(p.trade_no)
  end
  return json_encode({
    valid = true,
    reason = "",
    payment_id = str(p.out_trade_no),
    amount = str(p.money),
    status = status,
    gateway_payment_id = str(p.trade_no),
    gateway_tx_id = tx,
    ack = "success",
  })
end

function refund(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("epay config: " .. bad)
  end
  if str(input.currency) ~= CURRENCY then
    -- Nothing is sent: "failed" means no money moved.
    return json_encode({ status = "failed", gateway_refund_id = "",
      message = "epay refunds " .. CURRENCY .. " only; this payment is in " .. snippet(input.currency) })
  end
  local params = {
    pid = str(cfg.pid),
    key = str(cfg.key),
    money = str(input.amount),
  }
  if str(input.gateway_payment_id) ~= "" then
    params.trade_no = str(input.gateway_payment_id)
  else
    params.out_trade_no = str(input.payment_id)
  end
  -- No retry: a refund sent twice may be paid out twice.
  local resp, err = request(http_post, base_url(cfg) .. "/api.php?act=refund", form_encode(params),
    "application/x-www-form-urlencoded", json_encode({ timeout_ms = 15000, retry = false }))
  if resp == nil then
    -- Nothing was sent when the breaker is open or the connection was
    -- refused: fail the call, so the service answers Unavailable and the
    -- refund can simply be asked again.
    if string.find(err, "circuit open", 1, true) or string.find(err, "connection refused", 1, true) then
      error("epay refund not sent: " .. err)
    end
    -- Otherwise the request may or may not have reached epay: the outcome is
    -- unknown, and "failed" could invite a second refund. Someone must look.
    return json_encode({ status = "unknown", gateway_refund_id = "",
      message = "refund outcome unknown (" .. err .. "); check the epay merchant console" })
  end
  if resp.status >= 500 then
    return json_encode({ status = "unknown", gateway_refund_id = "",
      message = "refund outcome unknown (HTTP " .. str(resp.status) .. "); check the epay merchant console" })
  end
  if resp.status < 200 or resp.status > 299 then
    return json_encode({ status = "failed", gateway_refund_id = "", message = "HTTP " .. str(resp.status) })
  end
  local body = json_table(resp.body) or {}
  local code = str(body.code)
  if code == "" then
    return json_encode({ status = "unknown", gateway_refund_id = "",
      message = "refund outcome unknown (unexpected answer: " .. snippet(resp.body) .. "); check the epay merchant console" })
  end
  -- Deployments differ: some answer code 1, others code 0, for a success.
  if code == "1" or code == "0" then
    return json_encode({ status = "succeeded", gateway_refund_id = str(body.refund_no), message = str(body.msg) })
  end
  local msg = str(body.msg)
  if msg == "" then
    msg = "epay answered code " .. code
  end
  return json_encode({ status = "failed", gateway_refund_id = "", message = msg })
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local bad = check_config(cfg)
  if bad then
    return json_encode({ ok = false, message = bad })
  end
  -- Ask for an order that does not exist: the merchant check comes first,
  -- so "order not found" proves pid and key, and a key error disproves them.
  local url = base_url(cfg) .. "/api.php?act=order&pid=" .. urlencode(str(cfg.pid)) ..
      "&key=" .. urlencode(str(cfg.key)) .. "&out_trade_no=paymentd-config-test"
  local resp, err = request(http_get, url, "{}")
  if resp == nil then
    return json_encode({ ok = false, message = "cannot reach epay: " .. err })
  end
  if resp.status < 200 or resp.status > 299 then
    return json_encode({ ok = false, message = "epay answered HTTP " .. str(resp.status) })
  end
  -- The answer's words stay out of the message: an admin may point api_url
  -- anywhere, and the test must not read other services' pages for them.
  local body = json_table(resp.body) or {}
  local code, msg = str(body.code), str(body.msg)
  if code == "" then
    return json_encode({ ok = false, message = "not an epay API: the answer (HTTP " .. str(resp.status) .. ") has no code" })
  end
  if code == "1" or string.find(msg, "订单", 1, true) and string.find(msg, "不存在", 1, true)
      or string.find(string.lower(msg), "not exist", 1, true) then
    return json_encode({ ok = true, message = "pid and key accepted" })
  end
  log("warn", "epay test_config: the credentials were refused: " .. snippet(msg))
  return json_encode({ ok = false, message = "epay refused the pid and key (its reason is in the service log)" })
end
