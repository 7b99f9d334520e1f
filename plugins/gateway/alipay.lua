-- Alipay (支付宝) gateway, the official Open API (https://opendocs.alipay.com).
--
-- Protocol:
--   request  every call carries app_id, method, format=JSON, charset=utf-8,
--            sign_type=RSA2, timestamp ("yyyy-MM-dd HH:mm:ss", Beijing time),
--            version=1.0 and biz_content (JSON); sign = base64 SHA256withRSA
--            (rsa_sha256_sign, the app's private key) over every other
--            non-empty parameter, names sorted ascending, k=v joined with &,
--            values raw.
--   answer   {"<method, dots as _>_response":{...},"sign":"..."}: the sign is
--            Alipay's over the node's JSON text exactly as it arrived, so the
--            text is cut out of the body (as Alipay's SDKs do) and verified
--            with the Alipay public key before anything in it is believed.
--            code 10000 is success, 40004 a business failure (sub_code ACQ.*),
--            20000 "try again"; a refusal at the gateway (40001/40002, a bad
--            signature, an unknown app) comes unsigned, in the method's node
--            or in "error_response"; an answer also names the trade it is
--            about, which must be the one asked (the signature does not
--            cover the request).
--   create   page mode: alipay.trade.page.pay needs no call from us: the
--            payment_url is the signed request itself (GET gateway.do?...),
--            which the buyer's browser takes to Alipay's cashier.
--            qr_mode: alipay.trade.precreate → qr_code.
--   notify   POST form to notify_url; signed like a request but without
--            sign_type in the signed text; we answer "success".
--   query    alipay.trade.query; refund alipay.trade.refund with
--            out_request_no = the refund id, so sending a refund again never
--            pays it twice (and a refund whose answer says no money moved
--            this time is confirmed with alipay.trade.fastpay.refund.query).
--
-- Alipay takes letters, digits and _ in out_trade_no and out_request_no,
-- so our ids (UUIDs) travel without their hyphens and come back with them.
-- Money is passed through as the strings given and received; this script
-- never does arithmetic on it. Domestic Alipay books yuan only: info()
-- declares currencies = {"CNY"}.

function version()
  return "1.1.0"
end

local CURRENCY = "CNY"
local DEFAULT_GATEWAY = "https://openapi.alipay.com/gateway.do"

-- helpers -------------------------------------------------------------------

local find, sub, gsub, match = string.find, string.sub, string.gsub, string.match

local function gateway_url(cfg)
  local u = str(cfg.gateway_url)
  if u == "" then
    return DEFAULT_GATEWAY
  end
  return u
end

local function qr_mode(cfg)
  return cfg.qr_mode == true or str(cfg.qr_mode) == "true"
end

local function check_config(cfg)
  if not match(gateway_url(cfg), "^https?://[^/%s]+") then
    return "gateway_url must be an http(s) URL"
  end
  if str(cfg.app_id) == "" then
    return "app_id is required"
  end
  if str(cfg.seller_id) == "" then
    return "seller_id is required"
  end
  if str(cfg.app_private_key) == "" then
    return "app_private_key is required"
  end
  if str(cfg.alipay_public_key) == "" then
    return "alipay_public_key is required"
  end
  return nil
end

-- compact is an id as Alipay takes it: a UUID without its hyphens.
local function compact(id)
  return (gsub(str(id), "-", ""))
end

-- expand gives a compacted UUID its hyphens back; anything else is
-- returned as it is (the service finds no payment by it).
local function expand(id)
  local a, b, c, d, e = match(id, "^(%x%x%x%x%x%x%x%x)(%x%x%x%x)(%x%x%x%x)(%x%x%x%x)(%x%x%x%x%x%x%x%x%x%x%x%x)$")
  if a == nil then
    return id
  end
  return a .. "-" .. b .. "-" .. c .. "-" .. d .. "-" .. e
end

-- subject is what the cashier shows: Alipay refuses / = & in it and takes
-- at most 256 characters (counted as characters, so UTF-8 is cut whole).
local function subject(input)
  local s = str(input.subject)
  if s == "" then
    s = "Order " .. str(input.order_id)
  end
  s = gsub(s, "[/=&%c]", " ")
  local out, n = {}, 0
  for ch in string.gmatch(s, "[%z\1-\127\194-\244][\128-\191]*") do
    n = n + 1
    if n > 256 then
      break
    end
    out[n] = ch
  end
  return table.concat(out)
end

-- beijing_time is the service clock as "yyyy-MM-dd HH:mm:ss" in UTC+8, the
-- time zone Alipay reads every timestamp in.
local function beijing_time()
  return format_time(now_unix(), "+08:00", "2006-01-02 15:04:05")
end

-- rfc3339 reads an Alipay time ("yyyy-MM-dd HH:mm:ss", Beijing time).
local function rfc3339(t)
  local d, h = match(str(t), "^(%d%d%d%d%-%d%d%-%d%d) (%d%d:%d%d:%d%d)$")
  if d == nil then
    return ""
  end
  return d .. "T" .. h .. "+08:00"
end

-- signing_string is the text RSA2 signs: non-empty parameters but sign
-- (and sign_type, for what Alipay sends us), sorted, k=v joined with &
-- (the host's sign_string).
local function signing_string(params, without_sign_type)
  if without_sign_type then
    return sign_string(params, "sign,sign_type")
  end
  return sign_string(params, "sign")
end

-- signed_request is the parameters of a call of method with biz (the
-- biz_content) and extra common parameters, signed with the app's key.
local function signed_request(cfg, method, biz, extra)
  local p = {
    app_id = str(cfg.app_id),
    method = method,
    format = "JSON",
    charset = "utf-8",
    sign_type = "RSA2",
    timestamp = beijing_time(),
    version = "1.0",
    biz_content = json_encode(biz),
  }
  for k, v in pairs(extra or {}) do
    p[k] = v
  end
  p.sign = rsa_sha256_sign(str(cfg.app_private_key), signing_string(p, false))
  return p
end

-- verify checks Alipay's signature of text with the configured public key;
-- a key that cannot be read is an error of the configuration (raised).
local function verify(cfg, text, sig)
  return rsa_sha256_verify(str(cfg.alipay_public_key), text, sig) == true
end

-- node_text is the JSON text of node in body exactly as it arrived: from
-- after `"node":` to before the last `,"sign":`.
local function node_text(body, node)
  local _, e = find(body, '"' .. node .. '":', 1, true)
  if e == nil then
    return nil
  end
  local last, pos = nil, e + 1
  while true do
    local s = find(body, ',"sign":', pos, true)
    if s == nil then
      break
    end
    last, pos = s, s + 1
  end
  if last == nil then
    return nil
  end
  return sub(body, e + 1, last - 1)
end

-- call runs one Open API call (extra: more common parameters, such as
-- notify_url). It returns the answer's node (a table) and
-- whether Alipay's signature over it verified, or nil and a failure
-- {kind, message}: kind "unsent" (refused connection, open circuit: the
-- call never left), "transport" (it may have arrived), "http", "answer"
-- (unreadable), "signature" (an answer that is not Alipay's).
local function call(cfg, method, biz, retry, timeout_ms, extra)
  local params = signed_request(cfg, method, biz, extra)
  local ok, raw = pcall(http_post, gateway_url(cfg), form_encode(params),
    "application/x-www-form-urlencoded;charset=utf-8",
    json_encode({ timeout_ms = timeout_ms, retry = retry }))
  if not ok then
    local msg = tostring(raw)
    if find(msg, "circuit open", 1, true) or find(msg, "connection refused", 1, true) then
      return nil, { kind = "unsent", message = msg }
    end
    return nil, { kind = "transport", message = msg }
  end
  local resp = json_table(raw) or {}
  if resp.status == nil then
    return nil, { kind = "transport", message = "no response" }
  end
  if resp.status < 200 or resp.status > 299 then
    return nil, { kind = "http", message = "HTTP " .. str(resp.status) .. ": " .. snippet(resp.body), status = resp.status }
  end
  local body = str(resp.body)
  local doc = json_table(body) or {}
  local name = gsub(method, "%.", "_") .. "_response"
  local node = doc[name]
  if type(node) ~= "table" then
    name, node = "error_response", doc.error_response
  end
  if type(node) ~= "table" then
    return nil, { kind = "answer", message = "not an Alipay answer: " .. snippet(body) }
  end
  local sig = str(doc.sign)
  if sig == "" then
    -- Alipay signs every answer of an app it knows; a success without a
    -- signature is nobody's.
    if str(node.code) == "10000" then
      return nil, { kind = "signature", message = "an unsigned success answer" }
    end
    return node, false
  end
  local text = node_text(body, name)
  if text == nil or not verify(cfg, text, sig) then
    return nil, { kind = "signature", message = "the answer's signature does not verify with the Alipay public key" }
  end
  return node, true
end

-- refusal is the message of a non-success answer.
local function refusal(node)
  local parts = { str(node.code) }
  for _, k in ipairs({ "msg", "sub_code", "sub_msg" }) do
    if str(node[k]) ~= "" then
      parts[#parts + 1] = str(node[k])
    end
  end
  return table.concat(parts, " ")
end

-- form_decode decodes a form-encoded string ("+" is a space; raises on a
-- malformed percent-encoding).
local function form_decode(s)
  if find(s, "%", 1, true) or find(s, "+", 1, true) then
    return urldecode(s)
  end
  return s
end

local function decode_pair(k, v)
  return form_decode(k), form_decode(v)
end

-- parse_form reads a notify body: each name and value form-decoded once,
-- nothing else. A repeated name (as sent or once decoded) is ambiguous and
-- refused, whichever copy the signature covers. Returns the table or nil
-- and the reason.
local function parse_form(payload)
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
        return nil, "repeated parameter " .. k
      end
      seen[k] = true
      if k ~= "" then
        local ok, dk, dv = pcall(decode_pair, k, v)
        if not ok then
          return nil, "malformed percent-encoding in payload"
        end
        if p[dk] ~= nil then
          return nil, "repeated parameter " .. dk
        end
        p[dk] = dv
      end
    end
    pos = amp + 1
  end
  return p
end

-- contract ------------------------------------------------------------------

function info(config_json, input_json)
  return json_encode({
    display_name = "支付宝 Alipay",
    description = "Alipay's official Open API: the computer-site cashier (alipay.trade.page.pay) or a QR code (alipay.trade.precreate), RSA2 signing.",
    supports_query = true,
    supports_refund = true,
    currencies = { CURRENCY },
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "app_id", "seller_id", "app_private_key", "alipay_public_key" },
    additionalProperties = false,
    properties = {
      app_id = {
        type = "string",
        title = "App ID (APPID)",
        description = "The application's id on the Alipay Open Platform, 16 digits.",
        pattern = "^[0-9]{16}$",
      },
      seller_id = {
        type = "string",
        title = "Seller ID (PID)",
        description = "The merchant's partner id, 2088 and 12 digits: notifications for another merchant are refused.",
        pattern = "^2088[0-9]{12}$",
      },
      app_private_key = {
        type = "string",
        title = "App private key",
        description = "RSA2 (2048-bit) private key of the application, PEM (PKCS #1 or #8) or the bare base64 Alipay's key tool shows.",
        minLength = 1,
        ["x-secret"] = true,
      },
      alipay_public_key = {
        type = "string",
        title = "Alipay public key",
        description = "The Alipay public key (支付宝公钥) shown for the application, PEM or bare base64: every notification and answer is verified with it.",
        minLength = 1,
      },
      gateway_url = {
        type = "string",
        title = "Gateway URL",
        description = "The Open API gateway; the sandbox is https://openapi-sandbox.dl.alipaydev.com/gateway.do.",
        pattern = "^https?://",
        default = DEFAULT_GATEWAY,
        -- Requests signed with the app private key go there: changing it
        -- needs the key sent again.
        ["x-endpoint"] = true,
      },
      qr_mode = {
        type = "boolean",
        title = "QR code instead of the cashier page",
        description = "Create payments with alipay.trade.precreate (a QR code to scan with the Alipay app) rather than alipay.trade.page.pay.",
        default = false,
      },
    },
  })
end

function create_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("alipay config: " .. bad)
  end
  if str(input.currency) ~= CURRENCY then
    error("alipay takes " .. CURRENCY .. " only, not " .. snippet(input.currency))
  end
  local biz = {
    out_trade_no = compact(input.payment_id),
    total_amount = str(input.amount),
    subject = subject(input),
  }
  local extra = { notify_url = str(input.notify_url) }

  if not qr_mode(cfg) then
    biz.product_code = "FAST_INSTANT_TRADE_PAY"
    extra.return_url = str(input.return_url)
    local params = signed_request(cfg, "alipay.trade.page.pay", biz, extra)
    local base = gateway_url(cfg)
    local sep = "?"
    if find(base, "?", 1, true) then
      sep = "&"
    end
    return json_encode({
      payment_url = base .. sep .. form_encode(params),
      qr_code = "",
      instructions = "",
      gateway_payment_id = "", -- Alipay names the trade when the buyer opens the cashier
    })
  end

  -- precreate is idempotent by out_trade_no (the same trade answers the
  -- same QR code), so it may be sent again.
  local node, failure = call(cfg, "alipay.trade.precreate", biz, true, 10000, extra)
  if node == nil then
    error("alipay precreate: " .. failure.message)
  end
  if str(node.code) ~= "10000" then
    error("alipay precreate refused: " .. refusal(node))
  end
  if str(node.out_trade_no) ~= biz.out_trade_no then
    error("alipay precreate: the answer is about trade " .. snippet(node.out_trade_no) .. ", not " .. biz.out_trade_no)
  end
  if str(node.qr_code) == "" then
    error("alipay precreate: answer has no qr_code")
  end
  return json_encode({
    payment_url = "",
    qr_code = str(node.qr_code),
    instructions = "",
    gateway_payment_id = "",
  })
end

function query_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("alipay config: " .. bad)
  end
  local node, failure = call(cfg, "alipay.trade.query", { out_trade_no = compact(input.payment_id) }, true, 10000)
  if node == nil then
    error("alipay query: " .. failure.message)
  end
  local code = str(node.code)
  if code == "40004" and str(node.sub_code) == "ACQ.TRADE_NOT_EXIST" then
    -- The buyer has not opened the cashier yet: Alipay has no trade.
    return json_encode({ status = "pending", gateway_payment_id = "", gateway_tx_id = "", amount = "", paid_at = "" })
  end
  if code ~= "10000" then
    error("alipay query refused: " .. refusal(node))
  end
  -- Alipay's signature does not name the request it answers: an answer
  -- about another trade (a replayed one) proves nothing about this one.
  if str(node.out_trade_no) ~= compact(input.payment_id) then
    error("alipay query: the answer is about trade " .. snippet(node.out_trade_no) .. ", not " .. compact(input.payment_id))
  end
  local ts = str(node.trade_status)
  local out = {
    status = "pending",
    gateway_payment_id = str(node.trade_no),
    gateway_tx_id = "",
    amount = str(node.total_amount),
    paid_at = "",
  }
  local paid = rfc3339(node.send_pay_date)
  if ts == "TRADE_SUCCESS" or ts == "TRADE_FINISHED" or (ts == "TRADE_CLOSED" and paid ~= "") then
    -- A paid trade refunded in full is closed too, but it was paid.
    out.status = "success"
    out.gateway_tx_id = str(node.trade_no)
    out.paid_at = paid
  elseif ts == "TRADE_CLOSED" then
    out.status = "failed"
  end
  return json_encode(out)
end

function parse_callback(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local function invalid(reason)
    return json_encode({ valid = false, reason = reason })
  end
  if check_config(cfg) then
    return invalid("gateway interface is not configured")
  end
  if str(input.method) ~= "POST" then
    return invalid("Alipay notifies by POST")
  end
  local ct = string.lower(str(input.content_type))
  if ct ~= "" and not find(ct, "application/x-www-form-urlencoded", 1, true) then
    return invalid("unsupported content type")
  end
  local p, why = parse_form(str(input.payload))
  if p == nil then
    return invalid(why)
  end
  local sig = str(p.sign)
  if sig == "" then
    return invalid("missing sign")
  end
  if str(p.sign_type) ~= "RSA2" then
    return invalid("unsupported sign_type (RSA2 only)")
  end
  local cs = string.lower(str(p.charset))
  if cs ~= "" and cs ~= "utf-8" then
    return invalid("unsupported charset " .. snippet(p.charset))
  end
  if str(p.app_id) ~= str(cfg.app_id) then
    return invalid("app_id does not match this interface")
  end
  local ok, good = pcall(verify, cfg, signing_string(p, true), sig)
  if not ok then
    return invalid("the Alipay public key cannot be read")
  end
  if not good then
    return invalid("bad signature")
  end
  if str(p.seller_id) ~= str(cfg.seller_id) then
    return invalid("seller_id does not match this merchant")
  end
  if str(p.out_trade_no) == "" or str(p.total_amount) == "" or str(p.trade_no) == "" then
    return invalid("missing out_trade_no, trade_no or total_amount")
  end
  local ts = str(p.trade_status)
  local status = "pending"
  if ts == "TRADE_SUCCESS" or ts == "TRADE_FINISHED" then
    -- Also what a refund's notify says while some money remains: the
    -- same trade, already settled, answered as a duplicate.
    status = "success"
  elseif ts == "TRADE_CLOSED" then
    -- Closed unpaid, or refunded in full: a notification changes nothing
    -- for either (the service fails payments on queries only).
    status = "failed"
  end
  return json_encode({
    valid = true,
    reason = "",
    payment_id = expand(str(p.out_trade_no)),
    amount = str(p.total_amount),
    status = status,
    gateway_payment_id = str(p.trade_no),
    gateway_tx_id = str(p.trade_no),
    ack = "success",
  })
end

function refund(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("alipay config: " .. bad)
  end
  local function outcome(status, id, message)
    return json_encode({ status = status, gateway_refund_id = id, message = message })
  end
  if str(input.currency) ~= CURRENCY then
    return outcome("failed", "", "alipay refunds " .. CURRENCY .. " only; this payment is in " .. snippet(input.currency))
  end
  local out_trade_no, request_no = compact(input.payment_id), compact(input.refund_id)
  local biz = {
    out_trade_no = out_trade_no,
    refund_amount = str(input.amount),
    out_request_no = request_no,
    refund_reason = subject({ subject = input.reason, order_id = "" }),
  }
  if str(input.reason) == "" then
    biz.refund_reason = nil
  end
  -- out_request_no makes a repeat the same refund: Alipay pays it once, so
  -- the call may be sent again after a lost answer.
  local node, second = call(cfg, "alipay.trade.refund", biz, true, 15000)
  if node == nil then
    local failure = second
    if failure.kind == "unsent" then
      error("alipay refund not sent: " .. failure.message)
    end
    if failure.kind == "http" and failure.status and failure.status < 500 then
      return outcome("failed", "", failure.message)
    end
    return outcome("unknown", "", "refund outcome unknown (" .. failure.message .. "); check the Alipay merchant console")
  end
  local signed = second == true
  local code = str(node.code)
  if code == "10000" then
    if str(node.out_trade_no) ~= out_trade_no then
      return outcome("unknown", "", "Alipay's answer is about trade " .. snippet(node.out_trade_no) .. ", not " .. out_trade_no)
    end
    if str(node.fund_change) == "Y" then
      return outcome("succeeded", request_no, "refunded; " .. str(node.refund_fee) .. " refunded in all")
    end
    -- fund_change N: no money moved by this answer; ask whether this
    -- out_request_no was refunded before (a repeat after a lost answer).
    local q, qf = call(cfg, "alipay.trade.fastpay.refund.query",
      { out_trade_no = out_trade_no, out_request_no = request_no }, true, 10000)
    if q ~= nil and str(q.code) == "10000" and str(q.refund_status) == "REFUND_SUCCESS"
        and str(q.out_request_no) == request_no and str(q.out_trade_no) == out_trade_no then
      if str(q.refund_amount) ~= "" and str(q.refund_amount) ~= str(input.amount) then
        return outcome("unknown", request_no, "Alipay holds refund " .. request_no .. " of " .. str(q.refund_amount) .. ", not " .. str(input.amount))
      end
      return outcome("succeeded", request_no, "refunded (confirmed by refund query)")
    end
    local why = qf and qf.message or refusal(q or {})
    return outcome("unknown", "", "Alipay accepted the refund without moving money and the refund query does not confirm it (" .. why .. ")")
  end
  if (code == "40004" and signed) or code == "40001" or code == "40002" then
    -- A business refusal (Alipay signs those), or a refusal at the gateway
    -- before any business (unsigned): nothing was paid.
    return outcome("failed", "", refusal(node))
  end
  -- 20000 (service unavailable) and anything else: Alipay says to ask again.
  return outcome("unknown", "", "refund outcome unknown (" .. refusal(node) .. "); check the Alipay merchant console")
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local bad = check_config(cfg)
  if bad then
    return json_encode({ ok = false, message = bad })
  end
  -- Ask for a trade that does not exist: a signed ACQ.TRADE_NOT_EXIST proves
  -- the app id and private key (Alipay verified our request) and the Alipay
  -- public key (we verified its answer).
  local ok, node, failure = pcall(call, cfg, "alipay.trade.query", { out_trade_no = "paymentd_config_test" }, true, 10000)
  if not ok then
    return json_encode({ ok = false, message = "the keys cannot be used: " .. tostring(node) })
  end
  -- The answer's words stay out of the message (they go to the log): an
  -- admin may point gateway_url anywhere, and the test must not read other
  -- services' pages for them.
  if node == nil then
    if failure.kind == "signature" then
      return json_encode({ ok = false, message = "Alipay's answer does not verify: check the Alipay public key" })
    end
    if failure.kind == "http" then
      return json_encode({ ok = false, message = "Alipay answered HTTP " .. str(failure.status) })
    end
    if failure.kind == "answer" then
      return json_encode({ ok = false, message = "not an Alipay gateway: the answer is not an Alipay answer" })
    end
    return json_encode({ ok = false, message = "cannot reach Alipay: " .. failure.message })
  end
  local code = str(node.code)
  if code == "10000" or (code == "40004" and str(node.sub_code) == "ACQ.TRADE_NOT_EXIST") then
    return json_encode({ ok = true, message = "app id and both keys accepted" })
  end
  log("warn", "alipay test_config: the app was refused: " .. refusal(node))
  return json_encode({ ok = false, message = "Alipay refused the app (its reason is in the service log)" })
end
