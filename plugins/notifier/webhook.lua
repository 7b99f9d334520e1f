-- Webhook notifier: POSTs each notification as JSON to the configured URL,
-- signed so the receiver can tell it came from us and is fresh.
--
--   body   {"notification_id","recipient","subject","body","sent_at"}
--   X-Paymentd-Timestamp: <sent_at, RFC 3339 UTC>
--   X-Paymentd-Signature: sha256=<hex HMAC-SHA256(secret, timestamp .. "." .. body)>
--
-- A receiver recomputes the HMAC over the timestamp header, a dot and the
-- raw body, compares in constant time, rejects timestamps older than a few
-- minutes, and de-duplicates on notification_id: delivery is at least once
-- (the service retries a failed send when we say it is retryable).
--
-- Outcome of a send: 2xx → sent; 5xx, 408, 429, a transport error or an open
-- circuit → failed, retryable; any other status → failed, not retryable
-- (the receiver refused it; sending it again will not help).
--
-- render() produces a human subject and a body that is itself JSON
-- ({"event_type","data"}), so a receiver can act on it without parsing prose.

function version()
  return "1.0.3"
end

local RESERVED = {
  ["content-type"] = true,
  ["x-paymentd-timestamp"] = true,
  ["x-paymentd-signature"] = true,
  ["x-paymentd-notification-id"] = true,
}

local function config_errors(cfg)
  local errs = {}
  local url = str(cfg.url)
  if not string.match(url, "^https?://[^/%s]+") then
    errs[#errs + 1] = { key = "url", message = "must be an http:// or https:// URL" }
  end
  if #str(cfg.secret) < 16 then
    errs[#errs + 1] = { key = "secret", message = "must be at least 16 characters" }
  end
  if cfg.headers ~= nil then
    if type(cfg.headers) ~= "table" then
      errs[#errs + 1] = { key = "headers", message = "must be an object of header names to values" }
    else
      for k, v in pairs(cfg.headers) do
        if type(k) ~= "string" or type(v) ~= "string" then
          errs[#errs + 1] = { key = "headers", message = "names and values must be strings" }
        elseif RESERVED[string.lower(k)] then
          errs[#errs + 1] = { key = "headers", message = k .. " is set by the notifier" }
        end
      end
    end
  end
  return errs
end

-- deliver POSTs one signed payload; it returns the send result table.
local function deliver(cfg, payload)
  local body = json_encode(payload)
  local ts = payload.sent_at
  local headers = {}
  if type(cfg.headers) == "table" then
    for k, v in pairs(cfg.headers) do
      if type(k) == "string" and type(v) == "string" and not RESERVED[string.lower(k)] then
        headers[k] = v
      end
    end
  end
  headers["Content-Type"] = "application/json"
  headers["X-Paymentd-Timestamp"] = ts
  headers["X-Paymentd-Signature"] = "sha256=" .. hmac_sha256(str(cfg.secret), ts .. "." .. body)
  headers["X-Paymentd-Notification-Id"] = payload.notification_id

  -- One attempt per send: the notification queue owns the retries (with its
  -- backoff), and tells them apart by notification_id.
  local ok, raw = pcall(http_post_headers, str(cfg.url), body, json_encode(headers),
    json_encode({ timeout_ms = 10000, retry = false }))
  if not ok then
    return { status = "failed", message = "delivery failed: " .. tostring(raw), retryable = true }
  end
  local resp = json_table(raw) or {}
  local code = tonumber(resp.status)
  if code == nil then
    return { status = "failed", message = "delivery failed: no response", retryable = true }
  end
  if code >= 200 and code <= 299 then
    return { status = "sent", message = "HTTP " .. code, retryable = false }
  end
  local retryable = code >= 500 or code == 408 or code == 429
  return { status = "failed", message = "receiver answered HTTP " .. code, retryable = retryable }
end

function info(config_json, input_json)
  return json_encode({
    display_name = "Webhook",
    description = "POSTs notifications as JSON, signed with HMAC-SHA256.",
    channel = "webhook",
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "url", "secret" },
    additionalProperties = false,
    properties = {
      url = { type = "string", title = "Endpoint URL", pattern = "^https?://" },
      secret = { type = "string", title = "Signing secret", minLength = 16, ["x-secret"] = true },
      headers = {
        type = "object",
        title = "Extra headers",
        additionalProperties = { type = "string" },
      },
    },
  })
end

function validate_config(config_json, input_json)
  local errs = config_errors(json_table(config_json) or {})
  if #errs == 0 then
    return '{"ok":true,"errors":[]}' -- json_encode would write the empty table as {}
  end
  return json_encode({ ok = false, errors = errs })
end

local SUBJECTS = {
  order_paid = "Payment received for order {order_id}",
  order_provisioned = "Order {order_id} is ready",
  order_cancelled = "Order {order_id} was cancelled",
  order_refunded = "Order {order_id} was refunded",
  service_renewed = "Service of order {order_id} renewed until {ends_at}",
  service_suspended = "Service of order {order_id} was suspended",
  service_resumed = "Service of order {order_id} was resumed",
  service_terminated = "Service of order {order_id} has ended",
  renewal_reminder = "Renewal invoice {invoice_id} of order {order_id}: {kind}",
  plan_changed = "Order {order_id} changed plan to {to_product_id}",
  plan_change_lapsed = "Plan change of order {order_id} lapsed unpaid",
  payment_refunded = "Refund issued for payment {payment_id}",
}

function render(config_json, input_json)
  local input = json_table(input_json) or {}
  local event = str(input.event_type)
  local data = input.data
  if type(data) ~= "table" then
    data = {}
  end
  local subject = SUBJECTS[event] or ("Event " .. event)
  subject = string.gsub(subject, "{(%w[%w_]*)}", function(name)
    local v = str(data[name])
    if v == "" then
      return "?"
    end
    return v
  end)
  return json_encode({
    subject = subject,
    body = json_encode({ event_type = event, recipient = str(input.recipient), data = data }),
  })
end

function send(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local errs = config_errors(cfg)
  if #errs > 0 then
    return json_encode({ status = "failed", message = "bad config: " .. errs[1].key .. " " .. errs[1].message, retryable = false })
  end
  return json_encode(deliver(cfg, {
    notification_id = str(input.notification_id),
    recipient = str(input.recipient),
    subject = str(input.subject),
    body = str(input.body),
    sent_at = now(),
  }))
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local errs = config_errors(cfg)
  if #errs > 0 then
    return json_encode({ ok = false, message = errs[1].key .. " " .. errs[1].message })
  end
  local res = deliver(cfg, {
    notification_id = "test",
    recipient = "",
    subject = "paymentd webhook test",
    body = json_encode({ event_type = "ping" }),
    sent_at = now(),
  })
  if res.status == "sent" then
    return json_encode({ ok = true, message = "test notification delivered (" .. res.message .. ")" })
  end
  return json_encode({ ok = false, message = res.message })
end
