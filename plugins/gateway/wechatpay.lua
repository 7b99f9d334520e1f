-- WeChat Pay (微信支付) gateway, API v3 (https://pay.weixin.qq.com/doc/v3/merchant),
-- for a directly connected merchant (直连商户): Native (a QR code) and H5
-- (a page in the phone's browser) payments, order query and close, refunds.
--
-- Protocol:
--   request  JSON over HTTPS to api_base (https://api.mch.weixin.qq.com),
--            every call with Authorization: WECHATPAY2-SHA256-RSA2048
--            mchid="…",nonce_str="…",signature="…",timestamp="…",serial_no="…"
--            where signature = base64 SHA256withRSA (rsa_sha256_sign, the
--            merchant's API key) over "METHOD\nPATH?QUERY\ntimestamp\nnonce\nbody\n"
--            and serial_no names the merchant certificate of that key.
--   answer   2xx with a JSON body (204 without one); 4xx/5xx with
--            {"code","message"}. Every answer carries Wechatpay-Timestamp,
--            -Nonce, -Signature and -Serial: the signature is WeChat Pay's
--            (its public key, or its platform certificate) over
--            "timestamp\nnonce\nbody\n"; the serial must be the configured
--            one and the timestamp within 5 minutes of ours. A 2xx answer
--            is believed only when it verifies.
--   create   POST /v3/pay/transactions/native → code_url (the QR code), or
--            POST /v3/pay/transactions/h5 (scene_info with the buyer's IP)
--            → h5_url (the payment_url, with redirect_url = return_url).
--            time_expire bounds the order; attach carries its end as
--            "exp:<unix seconds>" so a query can close it afterwards.
--   query    GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=…
--            (404 ORDER_NOT_EXIST: the order was never placed); an unpaid
--            order past its end is closed
--            (POST …/out-trade-no/{out_trade_no}/close, 204) and failed.
--   notify   POST JSON {id, create_time, event_type, resource_type
--            "encrypt-resource", resource {algorithm AEAD_AES_256_GCM,
--            ciphertext, nonce, associated_data, original_type}, summary},
--            signed like an answer; the resource decrypts with the APIv3
--            key (aes_256_gcm_decrypt) into the transaction or the refund.
--            TRANSACTION.SUCCESS pays, REFUND.SUCCESS / REFUND.CLOSED /
--            REFUND.ABNORMAL report a refund. WeChat Pay takes any 2xx as
--            the acknowledgement; we answer {"code":"SUCCESS"}; the
--            service's refusals are 4xx/5xx, which WeChat Pay retries,
--            with the body its documentation asks of a failed handling,
--            {"code":"FAIL","message":"失败"} (info().callback_refusal).
--   refund   POST /v3/refund/domestic/refunds with out_refund_no = the
--            refund id (a resend is the same refund); a lost answer is
--            asked again with GET /v3/refund/domestic/refunds/{out_refund_no}.
--
-- out_trade_no and out_refund_no take letters, digits and _-*, at most 32
-- (64) characters: our UUIDs travel without their hyphens and come back
-- with them. Amounts are integers of fen (分): "12.30" is sent as 1230 and
-- 1230 read back as "12.30" by moving digits, never by float arithmetic.
-- Domestic WeChat Pay books CNY only.

function version()
  return "1.1.0"
end

local CURRENCY = "CNY"
local DEFAULT_API = "https://api.mch.weixin.qq.com"
local AUTH_SCHEME = "WECHATPAY2-SHA256-RSA2048"
local MAX_SKEW = 300 -- seconds either way, for answers and notifications
local DEFAULT_EXPIRE_MINUTES = 120
local ACK = '{"code":"SUCCESS","message":"成功"}'
local REFUSAL = '{"code":"FAIL","message":"失败"}'

local find, sub, gsub, match, lower, upper = string.find, string.sub, string.gsub, string.match, string.lower, string.upper
local floor = math.floor

-- config --------------------------------------------------------------------

local function api_base(cfg)
  local u = str(cfg.api_base)
  if u == "" then
    return DEFAULT_API
  end
  return (gsub(u, "/+$", ""))
end

local function mode(cfg)
  local m = str(cfg.mode)
  if m == "" then
    return "native"
  end
  return m
end

local function expire_minutes(cfg)
  local n = tonumber(str(cfg.expire_minutes))
  if n == nil then
    return DEFAULT_EXPIRE_MINUTES
  end
  return n
end

local function check_config(cfg)
  if not match(api_base(cfg), "^https?://[^/%s]+$") then
    return "api_base must be an http(s) URL without a path"
  end
  if not match(str(cfg.mchid), "^%d+$") then
    return "mchid is required (digits)"
  end
  if str(cfg.appid) == "" then
    return "appid is required"
  end
  if str(cfg.merchant_serial_no) == "" then
    return "merchant_serial_no is required"
  end
  if str(cfg.merchant_private_key) == "" then
    return "merchant_private_key is required"
  end
  if #str(cfg.api_v3_key) ~= 32 then
    return "api_v3_key must be the 32-character APIv3 key"
  end
  if str(cfg.wechatpay_public_key) == "" then
    return "wechatpay_public_key is required"
  end
  if str(cfg.wechatpay_serial) == "" then
    return "wechatpay_serial is required"
  end
  local m = mode(cfg)
  if m ~= "native" and m ~= "h5" then
    return "mode must be native or h5"
  end
  local e = expire_minutes(cfg)
  if e ~= floor(e) or e < 5 or e > 1440 then
    return "expire_minutes must be a whole number from 5 to 1440"
  end
  return nil
end

-- ids and money ---------------------------------------------------------------

local function compact(id)
  return (gsub(str(id), "-", ""))
end

local function expand(id)
  local a, b, c, d, e = match(str(id), "^(%x%x%x%x%x%x%x%x)(%x%x%x%x)(%x%x%x%x)(%x%x%x%x)(%x%x%x%x%x%x%x%x%x%x%x%x)$")
  if a == nil then
    return str(id)
  end
  return a .. "-" .. b .. "-" .. c .. "-" .. d .. "-" .. e
end

-- to_fen turns the service's "12.30" into the number 1230, or nil for
-- anything that is not a positive amount with at most two decimals.
local function to_fen(amount)
  local whole, frac = match(str(amount), "^(%d+)%.?(%d*)$")
  if whole == nil or #frac > 2 or #whole > 10 or (find(str(amount), ".", 1, true) and frac == "") then
    return nil
  end
  frac = frac .. string.rep("0", 2 - #frac)
  local n = tonumber(whole .. frac)
  if n == nil or n <= 0 then
    return nil
  end
  return n
end

-- from_fen turns an integer of fen from a decoded answer into "12.30";
-- anything but a whole non-negative JSON number ("1230" as a string too)
-- is "" (a missing amount).
local function from_fen(v)
  if type(v) ~= "number" then
    return ""
  end
  local s = str(v)
  if not match(s, "^%d+$") or #s > 15 then
    return ""
  end
  s = gsub(s, "^0+", "")
  while #s < 3 do
    s = "0" .. s
  end
  return sub(s, 1, #s - 2) .. "." .. sub(s, #s - 1)
end

-- time ------------------------------------------------------------------------

-- rfc3339_beijing writes unix seconds as WeChat Pay writes times:
-- yyyy-MM-DDTHH:mm:ss+08:00.
local function rfc3339_beijing(unix)
  return format_time(unix, "+08:00", "2006-01-02T15:04:05Z07:00")
end

-- signatures --------------------------------------------------------------------

local function nonce(seed)
  return sub(upper(sha256(str(now_unix()) .. "|" .. tostring(math.random()) .. "|" .. seed)), 1, 32)
end

-- authorization is the Authorization header of a request.
local function authorization(cfg, method, path, body)
  local ts, n = str(now_unix()), nonce(method .. path .. body)
  local text = method .. "\n" .. path .. "\n" .. ts .. "\n" .. n .. "\n" .. body .. "\n"
  local sig = rsa_sha256_sign(str(cfg.merchant_private_key), text)
  return AUTH_SCHEME .. ' mchid="' .. str(cfg.mchid) .. '",nonce_str="' .. n .. '",signature="' .. sig ..
    '",timestamp="' .. ts .. '",serial_no="' .. str(cfg.merchant_serial_no) .. '"'
end

-- verify_signed checks what WeChat Pay signed: headers (names lower-cased)
-- Wechatpay-Timestamp, -Nonce, -Signature and -Serial over body. It
-- returns nil when it verifies, or the reason. A key that cannot be read is
-- configuration: it raises.
local function verify_signed(cfg, h, body)
  local ts, n, sig, serial = str(h["wechatpay-timestamp"]), str(h["wechatpay-nonce"]),
    str(h["wechatpay-signature"]), str(h["wechatpay-serial"])
  if ts == "" or n == "" or sig == "" or serial == "" then
    return "missing Wechatpay-Timestamp, -Nonce, -Signature or -Serial"
  end
  if serial ~= str(cfg.wechatpay_serial) then
    return "Wechatpay-Serial " .. snippet(serial) .. " is not the configured WeChat Pay key"
  end
  if not match(ts, "^%d+$") or #ts > 12 then
    return "malformed Wechatpay-Timestamp"
  end
  if math.abs(now_unix() - tonumber(ts)) > MAX_SKEW then
    return "stale Wechatpay-Timestamp"
  end
  local text = ts .. "\n" .. n .. "\n" .. body .. "\n"
  if not rsa_sha256_verify(str(cfg.wechatpay_public_key), text, sig) then
    return "bad signature"
  end
  return nil
end

local function lower_keys(t)
  local out = {}
  if type(t) == "table" then
    for k, v in pairs(t) do
      if type(k) == "string" then
        out[lower(k)] = v
      end
    end
  end
  return out
end

-- call sends one API call (body a table, or nil for a GET) and returns
-- {status, doc, body, verified, reason} or nil and a failure {kind,
-- message}: "unsent" (refused connection, open circuit: it never left),
-- "transport" (it may have arrived).
local function call(cfg, method, path, body, retry, timeout_ms)
  local text = ""
  if body ~= nil then
    text = json_encode(body)
  end
  local headers = {
    ["Authorization"] = authorization(cfg, method, path, text),
    ["Accept"] = "application/json",
    ["User-Agent"] = "paymentd-wechatpay/" .. version(),
  }
  local opts = json_encode({ timeout_ms = timeout_ms, retry = retry })
  local ok, raw
  if method == "GET" then
    ok, raw = pcall(http_get, api_base(cfg) .. path, json_encode(headers))
  else
    headers["Content-Type"] = "application/json"
    ok, raw = pcall(http_post_headers, api_base(cfg) .. path, text, json_encode(headers), opts)
  end
  if not ok then
    local msg = tostring(raw)
    if find(msg, "circuit open", 1, true) or find(msg, "connection refused", 1, true) then
      return nil, { kind = "unsent", message = msg }
    end
    return nil, { kind = "transport", message = msg }
  end
  local resp = json_table(raw) or {}
  if type(resp.status) ~= "number" then
    return nil, { kind = "transport", message = "no response" }
  end
  local rbody = str(resp.body)
  local out = { status = resp.status, body = rbody, doc = json_table(rbody) or {}, verified = false }
  local vok, why = pcall(verify_signed, cfg, lower_keys(resp.headers), rbody)
  if not vok then
    error("the WeChat Pay public key cannot be read: " .. tostring(why))
  end
  out.verified = why == nil
  out.reason = why or ""
  return out
end

-- refusal is an error answer as text.
local function refusal(r)
  local s = "HTTP " .. str(r.status)
  if str(r.doc.code) ~= "" then
    s = s .. " " .. str(r.doc.code)
  end
  if str(r.doc.message) ~= "" then
    s = s .. ": " .. snippet(r.doc.message)
  end
  return s
end

-- subject is the order's description: WeChat Pay takes 127 characters.
local function description(input)
  local s = str(input.subject)
  if s == "" then
    s = "Order " .. str(input.order_id)
  end
  s = gsub(s, "%c", " ")
  local out, n = {}, 0
  for ch in string.gmatch(s, "[%z\1-\127\194-\244][\128-\191]*") do
    n = n + 1
    if n > 127 then
      break
    end
    out[n] = ch
  end
  return table.concat(out)
end

-- amounts reads a transaction's amount object: the total in yuan, or ""
-- with the reason when it is not one the merchant can take as the order's.
-- A buyer who paid less than the total (a coupon) is reported with what
-- they paid, so the service holds it to the payment and an admin decides.
local function amounts(a)
  if type(a) ~= "table" then
    return "", "", "missing amount"
  end
  local total, paid = from_fen(a.total), from_fen(a.payer_total)
  if total == "" then
    return "", "", "missing amount.total"
  end
  local cur = str(a.currency)
  if cur == "" then
    cur = CURRENCY
  end
  if str(a.payer_total) ~= "" and paid ~= total then
    if paid == "" then
      return "", "", "malformed amount.payer_total"
    end
    return paid, cur, nil
  end
  return total, cur, nil
end

-- contract ------------------------------------------------------------------------

function info(config_json, input_json)
  return json_encode({
    display_name = "微信支付 WeChat Pay",
    description = "WeChat Pay API v3 for a direct merchant: Native (QR code) or H5 payments, signed WECHATPAY2-SHA256-RSA2048, notifications decrypted with the APIv3 key.",
    supports_query = true,
    supports_refund = true,
    currencies = { CURRENCY },
    callback_refusal = { content_type = "application/json", body = REFUSAL },
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "mchid", "appid", "merchant_serial_no", "merchant_private_key", "api_v3_key", "wechatpay_public_key", "wechatpay_serial" },
    additionalProperties = false,
    properties = {
      mchid = {
        type = "string", title = "Merchant ID (mchid)",
        description = "The merchant number (商户号): notifications for another merchant are refused.",
        pattern = "^[0-9]{1,32}$",
      },
      appid = {
        type = "string", title = "App ID (appid)",
        description = "The AppID bound to the merchant (公众号, 小程序 or 移动应用): notifications for another are refused.",
        pattern = "^[0-9A-Za-z_]{1,32}$",
      },
      merchant_serial_no = {
        type = "string", title = "Merchant certificate serial number",
        description = "The serial number of the merchant API certificate (商户API证书序列号) whose key signs the requests.",
        pattern = "^[0-9A-Za-z_]{1,64}$",
      },
      merchant_private_key = {
        type = "string", title = "Merchant API private key",
        description = "apiclient_key.pem: the RSA private key of the merchant API certificate, PEM (PKCS #8 or #1).",
        minLength = 1, ["x-secret"] = true,
      },
      api_v3_key = {
        type = "string", title = "APIv3 key",
        description = "The 32-character APIv3 key (APIv3密钥) set in the merchant platform: it decrypts the notifications.",
        minLength = 32, maxLength = 32, ["x-secret"] = true,
      },
      wechatpay_public_key = {
        type = "string", title = "WeChat Pay public key",
        description = "The WeChat Pay public key (微信支付公钥, PEM) or the platform certificate (平台证书): every answer and notification is verified with it.",
        minLength = 1,
      },
      wechatpay_serial = {
        type = "string", title = "WeChat Pay public key ID",
        description = "The public key ID (PUB_KEY_ID_…) or the platform certificate's serial number: answers and notifications must name it in Wechatpay-Serial.",
        pattern = "^[0-9A-Za-z_]{1,64}$",
      },
      mode = {
        type = "string", title = "Payment mode", enum = { "native", "h5" }, default = "native",
        description = "native: a QR code the buyer scans with WeChat (Native支付); h5: a page that opens WeChat from the phone's browser (H5支付).",
      },
      expire_minutes = {
        type = "integer", title = "Order lifetime (minutes)", minimum = 5, maximum = 1440, default = DEFAULT_EXPIRE_MINUTES,
        description = "time_expire of each order. Keep it below [billing].payment_timeout: an unpaid order past it is closed at WeChat Pay when the service asks about it.",
      },
      refund_notify_url = {
        type = "string", title = "Refund notification URL",
        description = "Where WeChat Pay notifies refunds: this interface's callback URL. Empty: the URL set in the merchant platform, if any.",
        pattern = "^(https?://.+)?$",
      },
      api_base = {
        type = "string", title = "API base URL",
        description = "Default https://api.mch.weixin.qq.com; the backup domain is https://api2.mch.weixin.qq.com.",
        pattern = "^(https?://[^/]+)?$", default = DEFAULT_API,
        ["x-endpoint"] = true,
      },
    },
  })
end

function create_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("wechatpay config: " .. bad)
  end
  if str(input.currency) ~= CURRENCY then
    error("wechatpay takes " .. CURRENCY .. " only, not " .. snippet(input.currency))
  end
  local total = to_fen(input.amount)
  if total == nil then
    error("wechatpay: cannot send amount " .. snippet(input.amount) .. " in fen")
  end
  local out_trade_no = compact(input.payment_id)
  local ends = now_unix() + expire_minutes(cfg) * 60
  local body = {
    appid = str(cfg.appid),
    mchid = str(cfg.mchid),
    description = description(input),
    out_trade_no = out_trade_no,
    time_expire = rfc3339_beijing(ends),
    attach = "exp:" .. str(ends),
    notify_url = str(input.notify_url),
    amount = { total = total, currency = CURRENCY },
  }
  local path = "/v3/pay/transactions/native"
  if mode(cfg) == "h5" then
    path = "/v3/pay/transactions/h5"
    local ip = str(input.client_ip)
    if ip == "" then
      error("wechatpay h5: the buyer's IP (client_ip) is required")
    end
    body.scene_info = { payer_client_ip = ip, h5_info = { type = "Wap" } }
  end
  -- Placing the same out_trade_no again with the same parameters answers
  -- the same order: the call may be resent.
  local r, failure = call(cfg, "POST", path, body, true, 10000)
  if r == nil then
    error("wechatpay create: " .. failure.message)
  end
  if r.status ~= 200 then
    error("wechatpay create refused: " .. refusal(r))
  end
  if not r.verified then
    error("wechatpay create: the answer is not WeChat Pay's (" .. r.reason .. ")")
  end
  if mode(cfg) == "h5" then
    local u = str(r.doc.h5_url)
    if not match(u, "^https?://") then
      error("wechatpay create: answer has no h5_url")
    end
    if str(input.return_url) ~= "" then
      local sep = "?"
      if find(u, "?", 1, true) then
        sep = "&"
      end
      u = u .. sep .. "redirect_url=" .. urlencode(str(input.return_url))
    end
    return json_encode({ payment_url = u, qr_code = "", instructions = "", gateway_payment_id = "" })
  end
  local code = str(r.doc.code_url)
  if code == "" then
    error("wechatpay create: answer has no code_url")
  end
  return json_encode({ payment_url = "", qr_code = code, instructions = "", gateway_payment_id = "" })
end

-- transaction_of checks that t, a transaction from an answer or a
-- notification, is about out_trade_no of this merchant and app.
local function transaction_of(cfg, t, out_trade_no)
  if str(t.mchid) ~= str(cfg.mchid) then
    return "mchid does not match this merchant"
  end
  if str(t.appid) ~= str(cfg.appid) then
    return "appid does not match this interface"
  end
  if out_trade_no ~= nil and str(t.out_trade_no) ~= out_trade_no then
    return "the answer is about order " .. snippet(t.out_trade_no) .. ", not " .. out_trade_no
  end
  return nil
end

local function close_order(cfg, out_trade_no)
  local r, failure = call(cfg, "POST", "/v3/pay/transactions/out-trade-no/" .. out_trade_no .. "/close",
    { mchid = str(cfg.mchid) }, true, 10000)
  if r == nil then
    return failure.message
  end
  if r.status ~= 204 and r.status ~= 200 then
    return refusal(r)
  end
  if not r.verified then
    return "the answer is not WeChat Pay's (" .. r.reason .. ")"
  end
  return nil
end

function query_payment(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("wechatpay config: " .. bad)
  end
  local out_trade_no = compact(input.payment_id)
  local pending = { status = "pending", gateway_payment_id = "", gateway_tx_id = "", amount = "", paid_at = "" }
  local r, failure = call(cfg, "GET", "/v3/pay/transactions/out-trade-no/" .. out_trade_no .. "?mchid=" .. str(cfg.mchid), nil, true, 10000)
  if r == nil then
    error("wechatpay query: " .. failure.message)
  end
  if r.status == 404 and str(r.doc.code) == "ORDER_NOT_EXIST" then
    -- Never placed (create_payment failed before WeChat Pay had it).
    return json_encode(pending)
  end
  if r.status ~= 200 then
    error("wechatpay query refused: " .. refusal(r))
  end
  if not r.verified then
    error("wechatpay query: the answer is not WeChat Pay's (" .. r.reason .. ")")
  end
  local t = r.doc
  local why = transaction_of(cfg, t, out_trade_no)
  if why then
    error("wechatpay query: " .. why)
  end
  local state = str(t.trade_state)
  if state == "SUCCESS" or state == "REFUND" then
    -- REFUND: paid, then (partly) refunded.
    local amount, cur, awhy = amounts(t.amount)
    if awhy then
      error("wechatpay query: " .. awhy)
    end
    return json_encode({
      status = "success",
      gateway_payment_id = str(t.transaction_id),
      gateway_tx_id = str(t.transaction_id),
      amount = amount,
      currency = cur,
      paid_at = str(t.success_time),
    })
  end
  if state == "CLOSED" or state == "REVOKED" or state == "PAYERROR" then
    return json_encode({ status = "failed", gateway_payment_id = str(t.transaction_id), gateway_tx_id = "", amount = "", paid_at = "" })
  end
  if state == "NOTPAY" then
    -- Past its time_expire the order can no longer be paid; closing it
    -- makes that WeChat Pay's word, and the payment fails.
    local ends = tonumber(match(str(t.attach), "^exp:(%d+)$") or "")
    if ends ~= nil and now_unix() > ends then
      local cwhy = close_order(cfg, out_trade_no)
      if cwhy then
        log("warn", "wechatpay: closing expired order " .. out_trade_no .. " failed: " .. cwhy)
        return json_encode(pending)
      end
      return json_encode({ status = "failed", gateway_payment_id = "", gateway_tx_id = "", amount = "", paid_at = "" })
    end
  end
  -- NOTPAY, USERPAYING: the buyer may still pay.
  return json_encode(pending)
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
    return invalid("WeChat Pay notifies by POST")
  end
  local payload = input.payload
  if input.payload_base64 ~= nil then
    payload = base64_decode(str(input.payload_base64))
  end
  payload = str(payload)
  local ok, why = pcall(verify_signed, cfg, lower_keys(input.headers), payload)
  if not ok then
    return invalid("the WeChat Pay public key cannot be read")
  end
  if why then
    return invalid(why)
  end
  local n = json_table(payload)
  if n == nil or type(n.resource) ~= "table" then
    return invalid("not a WeChat Pay notification")
  end
  local event = str(n.event_type)
  local res = n.resource
  if str(n.resource_type) ~= "encrypt-resource" or str(res.algorithm) ~= "AEAD_AES_256_GCM" then
    return invalid("unsupported resource (encrypt-resource, AEAD_AES_256_GCM only)")
  end
  local plain = aes_256_gcm_decrypt(str(cfg.api_v3_key), str(res.nonce), str(res.associated_data), str(res.ciphertext))
  if plain == nil then
    return invalid("resource does not decrypt with the APIv3 key")
  end
  local obj = json_table(plain)
  if obj == nil then
    return invalid("decrypted resource is not JSON")
  end
  if str(obj.mchid) ~= str(cfg.mchid) then
    return invalid("mchid does not match this merchant")
  end

  if event == "TRANSACTION.SUCCESS" then
    if str(res.original_type) ~= "transaction" then
      return invalid("TRANSACTION.SUCCESS without a transaction")
    end
    local twhy = transaction_of(cfg, obj, nil)
    if twhy then
      return invalid(twhy)
    end
    if str(obj.out_trade_no) == "" or str(obj.transaction_id) == "" then
      return invalid("missing out_trade_no or transaction_id")
    end
    if str(obj.trade_state) ~= "SUCCESS" then
      return invalid("TRANSACTION.SUCCESS of trade_state " .. snippet(obj.trade_state))
    end
    local amount, cur, awhy = amounts(obj.amount)
    if awhy then
      return invalid(awhy)
    end
    return json_encode({
      valid = true,
      reason = "",
      payment_id = expand(obj.out_trade_no),
      amount = amount,
      currency = cur,
      status = "success",
      gateway_payment_id = str(obj.transaction_id),
      gateway_tx_id = str(obj.transaction_id),
      ack = ACK,
    })
  end

  if event == "REFUND.SUCCESS" or event == "REFUND.CLOSED" or event == "REFUND.ABNORMAL" then
    if str(res.original_type) ~= "refund" then
      return invalid(event .. " without a refund")
    end
    if str(obj.out_refund_no) == "" or str(obj.out_trade_no) == "" then
      return invalid("missing out_refund_no or out_trade_no")
    end
    local status, rs = "pending", str(obj.refund_status)
    if event == "REFUND.SUCCESS" and rs == "SUCCESS" then
      status = "succeeded"
    elseif event == "REFUND.CLOSED" and rs == "CLOSED" then
      -- Closed: the money stayed with the merchant.
      status = "failed"
    elseif event == "REFUND.ABNORMAL" and rs == "ABNORMAL" then
      -- The money left the merchant but did not reach the buyer's account:
      -- it is redone from the merchant platform; an admin resolves it.
      status = "pending"
    else
      return invalid(event .. " of refund_status " .. snippet(rs))
    end
    local amount = ""
    if type(obj.amount) == "table" then
      amount = from_fen(obj.amount.refund)
    end
    if amount == "" then
      return invalid("missing amount.refund")
    end
    return json_encode({
      valid = true,
      reason = "",
      payment_id = expand(obj.out_trade_no),
      status = "refund",
      refund = {
        refund_id = expand(obj.out_refund_no),
        status = status,
        gateway_refund_id = str(obj.refund_id),
        amount = amount,
        currency = CURRENCY,
        message = "WeChat Pay: " .. snippet(rs),
      },
      ack = ACK,
    })
  end

  -- A verified event of another kind: acknowledged, nothing looked up.
  return json_encode({ valid = true, reason = "", status = "ignored", ack = ACK })
end

-- refund_outcome maps a refund object (an answer of the refund or refund
-- query API) onto the contract.
local function refund_outcome(input, out_trade_no, out_refund_no, doc)
  local function outcome(status, id, message)
    return json_encode({ status = status, gateway_refund_id = id, message = message })
  end
  if str(doc.out_refund_no) ~= out_refund_no or str(doc.out_trade_no) ~= out_trade_no then
    return outcome("unknown", "", "WeChat Pay's answer is about refund " .. snippet(doc.out_refund_no) .. " of " ..
      snippet(doc.out_trade_no) .. ", not " .. out_refund_no .. " of " .. out_trade_no)
  end
  local amount = ""
  if type(doc.amount) == "table" then
    amount = from_fen(doc.amount.refund)
  end
  if amount ~= from_fen(to_fen(input.amount) or -1) then
    return outcome("unknown", str(doc.refund_id), "WeChat Pay holds refund " .. out_refund_no .. " of " .. snippet(amount) .. ", not " .. str(input.amount))
  end
  local st = str(doc.status)
  if st == "SUCCESS" then
    return outcome("succeeded", str(doc.refund_id), "refunded")
  end
  if st == "PROCESSING" then
    return outcome("pending", str(doc.refund_id), "WeChat Pay is processing the refund; its notification completes it")
  end
  if st == "CLOSED" then
    return outcome("failed", str(doc.refund_id), "WeChat Pay closed the refund")
  end
  return outcome("unknown", str(doc.refund_id), "WeChat Pay answered refund status " .. snippet(st) .. "; check the merchant platform")
end

local function query_refund(cfg, out_refund_no)
  return call(cfg, "GET", "/v3/refund/domestic/refunds/" .. out_refund_no, nil, true, 10000)
end

function refund(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local bad = check_config(cfg)
  if bad then
    error("wechatpay config: " .. bad)
  end
  local function outcome(status, id, message)
    return json_encode({ status = status, gateway_refund_id = id, message = message })
  end
  if str(input.currency) ~= CURRENCY then
    return outcome("failed", "", "wechatpay refunds " .. CURRENCY .. " only; this payment is in " .. snippet(input.currency))
  end
  local amount, total = to_fen(input.amount), to_fen(input.payment_amount)
  if amount == nil or total == nil then
    return outcome("failed", "", "cannot send amount " .. snippet(input.amount) .. " of " .. snippet(input.payment_amount) .. " in fen")
  end
  local out_trade_no, out_refund_no = compact(input.payment_id), compact(input.refund_id)
  local body = {
    out_trade_no = out_trade_no,
    out_refund_no = out_refund_no,
    amount = { refund = amount, total = total, currency = CURRENCY },
  }
  if str(input.reason) ~= "" then
    body.reason = description({ subject = input.reason })
    if #body.reason > 80 then
      body.reason = clip(body.reason, 80)
    end
  end
  if str(cfg.refund_notify_url) ~= "" then
    body.notify_url = str(cfg.refund_notify_url)
  end
  -- out_refund_no makes a resend the same refund: WeChat Pay pays it once.
  local r, failure = call(cfg, "POST", "/v3/refund/domestic/refunds", body, true, 15000)
  if r == nil and failure.kind == "unsent" then
    error("wechatpay refund not sent: " .. failure.message)
  end
  if r ~= nil and r.status == 200 then
    if not r.verified then
      return outcome("unknown", "", "the refund answer is not WeChat Pay's (" .. r.reason .. "); check the merchant platform")
    end
    return refund_outcome(input, out_trade_no, out_refund_no, r.doc)
  end
  if r ~= nil and r.status >= 400 and r.status < 500 and r.verified then
    -- A signed refusal (NOT_ENOUGH, INVALID_REQUEST, …): nothing was paid.
    return outcome("failed", "", refusal(r))
  end
  -- A 5xx, a lost or unsigned answer: ask whether the refund exists.
  local what = failure and failure.message or refusal(r)
  local q = query_refund(cfg, out_refund_no)
  if q ~= nil and q.status == 200 and q.verified then
    return refund_outcome(input, out_trade_no, out_refund_no, q.doc)
  end
  return outcome("unknown", "", "refund outcome unknown (" .. what .. "); check the merchant platform")
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local bad = check_config(cfg)
  if bad then
    return json_encode({ ok = false, message = bad })
  end
  -- Ask about an order that does not exist: a signed ORDER_NOT_EXIST proves
  -- the merchant key and serial (WeChat Pay verified our request) and the
  -- WeChat Pay public key and its ID (we verified the answer).
  local ok, r, failure = pcall(call, cfg, "GET", "/v3/pay/transactions/out-trade-no/paymentdconfigtest?mchid=" .. str(cfg.mchid), nil, true, 10000)
  if not ok then
    return json_encode({ ok = false, message = "the keys cannot be used: " .. tostring(r) })
  end
  if r == nil then
    return json_encode({ ok = false, message = "cannot reach WeChat Pay: " .. failure.message })
  end
  if r.status == 401 then
    return json_encode({ ok = false, message = "WeChat Pay refused the request's signature: check mchid, the merchant key and its serial number" })
  end
  if not r.verified then
    return json_encode({ ok = false, message = "WeChat Pay's answer does not verify (" .. r.reason .. "): check the public key and its ID" })
  end
  if r.status == 404 or r.status == 200 then
    return json_encode({ ok = true, message = "merchant key and WeChat Pay public key accepted" })
  end
  log("warn", "wechatpay test_config: " .. refusal(r))
  return json_encode({ ok = false, message = "WeChat Pay answered HTTP " .. str(r.status) })
end
