-- First-party provider over a small JSON HTTP API (the fake in
-- internal/fakes/provider speaks it):
--
--   POST /v1/instances                {order_id, plan, customer_id} → 201/200 instance
--   GET  /v1/instances/{id}           instance {"id","status",...}
--   POST /v1/instances/{id}/{action}  start|stop|reboot|suspend|unsuspend|terminate
--   POST /v1/instances/{id}/plan      {plan} → instance on the new plan (change_plan)
--   GET  /v1/instances/{id}/usage     {"items":[{"metric","quantity","unit"}]}
--   GET  /v1/ping                     credentials check
--
-- Every call carries "Authorization: Bearer <token>".
--
-- A failed provisioning raises an error (the contract has no "failed"
-- status for provision): the service's event worker retries, and after its
-- last attempt cancels the order and refunds it.

function version()
  return "1.1.0"
end

local function base(cfg)
  local u = str(cfg.api_url)
  if not string.match(u, "^https?://[^/%s]+") then
    error("http_provider config: api_url must be an http(s) URL")
  end
  if str(cfg.token) == "" then
    error("http_provider config: token is required")
  end
  return (string.gsub(u, "/+$", ""))
end

local function headers(cfg, with_body)
  local h = { Authorization = "Bearer " .. str(cfg.token), Accept = "application/json" }
  if with_body then
    h["Content-Type"] = "application/json"
  end
  return json_encode(h)
end

-- call runs one host HTTP call and returns status, decoded body, raw body;
-- a transport failure or an open circuit raises.
local function call(fn, ...)
  local ok, raw = pcall(fn, ...)
  if not ok then
    error("provider API unreachable: " .. tostring(raw))
  end
  local resp = json_table(raw) or {}
  local code = tonumber(resp.status)
  if code == nil then
    error("provider API: no response")
  end
  return code, json_table(resp.body) or {}, resp.body
end

local function api_message(body, raw)
  if type(body.error) == "table" and str(body.error.message) ~= "" then
    return str(body.error.message)
  end
  return snippet(raw)
end

local KNOWN = {
  provisioning = true, running = true, stopped = true,
  suspended = true, terminated = true, error = true,
}

local function contract_status(s)
  s = str(s)
  if KNOWN[s] then
    return s
  end
  return "error"
end

local function details(inst)
  return {
    plan = str(inst.plan),
    ip = str(inst.ip),
    created_at = str(inst.created_at),
    provider_status = str(inst.status),
  }
end

local function path_id(input)
  local id = str(input.external_id)
  if id == "" or string.find(id, "[/?#%s]") then
    error("external_id is missing or not a plain id")
  end
  return urlencode(id)
end

function info(config_json, input_json)
  return json_encode({
    display_name = "HTTP provider",
    description = "Provisions and manages instances through the provider's JSON HTTP API.",
    type = "first_party_provider",
  })
end

function config_schema(config_json, input_json)
  return json_encode({
    ["$schema"] = "https://json-schema.org/draft/2020-12/schema",
    type = "object",
    required = { "api_url", "token" },
    additionalProperties = false,
    properties = {
      -- The token goes there: changing it needs the token sent again.
      api_url = { type = "string", title = "API URL", pattern = "^https?://", ["x-endpoint"] = true },
      token = { type = "string", title = "API token", minLength = 1, ["x-secret"] = true },
    },
  })
end

function test_config(config_json, input_json)
  local cfg = json_table(config_json) or {}
  local ok, res = pcall(function()
    local code, body, raw = call(http_get, base(cfg) .. "/v1/ping", headers(cfg, false))
    if code == 401 or code == 403 then
      return { ok = false, message = "the provider refused the token" }
    end
    if code < 200 or code > 299 then
      return { ok = false, message = "provider answered HTTP " .. code .. ": " .. api_message(body, raw) }
    end
    return { ok = true, message = "provider reachable, token accepted" }
  end)
  if not ok then
    return json_encode({ ok = false, message = tostring(res) })
  end
  return json_encode(res)
end

function provision(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local product = input.product
  if type(product) ~= "table" then
    product = {}
  end
  local plan = str(product.plan)
  if plan == "" then
    plan = str(product.id)
  end
  if str(input.order_id) == "" or plan == "" then
    error("provision: order_id and product.plan (or product.id) are required")
  end
  local payload = json_encode({
    order_id = str(input.order_id),
    plan = plan,
    customer_id = str(input.customer_id),
  })
  -- retry = true is safe here and only here among POSTs: the API is
  -- idempotent on order_id, so a retried POST whose first answer was lost
  -- returns the instance the first one created instead of a second machine.
  local code, body, raw = call(http_post_headers, base(cfg) .. "/v1/instances", payload,
    headers(cfg, true), json_encode({ timeout_ms = 30000, retry = true }))
  if code ~= 200 and code ~= 201 then
    error("provision refused (HTTP " .. code .. "): " .. api_message(body, raw))
  end
  if str(body.id) == "" then
    error("provision: answer has no instance id")
  end
  local status = str(body.status)
  if status ~= "running" then
    status = "provisioning"
  end
  return json_encode({ external_id = str(body.id), status = status, details = details(body) })
end

function status(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local code, body, raw = call(http_get, base(cfg) .. "/v1/instances/" .. path_id(input), headers(cfg, false))
  if code == 404 then
    return json_encode({ status = "error", details = { message = "the provider does not know this instance" } })
  end
  if code < 200 or code > 299 then
    error("status (HTTP " .. code .. "): " .. api_message(body, raw))
  end
  return json_encode({ status = contract_status(body.status), details = details(body) })
end

-- action runs one instance action. Every action but reboot is idempotent at
-- the API (repeating it when the instance is already there is a no-op), so
-- only reboot is sent without retries.
local function action(name, config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local code, body, raw = call(http_post_headers, base(cfg) .. "/v1/instances/" .. path_id(input) .. "/" .. name,
    "{}", headers(cfg, true), json_encode({ timeout_ms = 30000, retry = name ~= "reboot" }))
  if code >= 200 and code <= 299 then
    return json_encode({ ok = true, status = contract_status(body.status), message = "" })
  end
  if code == 404 or code == 409 or code == 422 then
    return json_encode({ ok = false, status = "", message = api_message(body, raw) })
  end
  error(name .. " (HTTP " .. code .. "): " .. api_message(body, raw))
end

function start(config_json, input_json)
  return action("start", config_json, input_json)
end

function stop(config_json, input_json)
  return action("stop", config_json, input_json)
end

function reboot(config_json, input_json)
  return action("reboot", config_json, input_json)
end

function suspend(config_json, input_json)
  return action("suspend", config_json, input_json)
end

function unsuspend(config_json, input_json)
  return action("unsuspend", config_json, input_json)
end

function terminate(config_json, input_json)
  return action("terminate", config_json, input_json)
end

-- change_plan moves the instance to the new product's plan (a plan change
-- took effect). Idempotent at the API: asking for the plan the instance
-- has is a no-op, so it is retried like the other actions.
function change_plan(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local product = input.product
  if type(product) ~= "table" then
    product = {}
  end
  local plan = str(product.plan)
  if plan == "" then
    plan = str(product.id)
  end
  if plan == "" then
    error("change_plan: product.plan (or product.id) is required")
  end
  local code, body, raw = call(http_post_headers, base(cfg) .. "/v1/instances/" .. path_id(input) .. "/plan",
    json_encode({ plan = plan }), headers(cfg, true), json_encode({ timeout_ms = 30000, retry = true }))
  if code >= 200 and code <= 299 then
    return json_encode({ ok = true, status = contract_status(body.status), message = "" })
  end
  if code == 404 or code == 409 or code == 422 then
    return json_encode({ ok = false, status = "", message = api_message(body, raw) })
  end
  error("change_plan (HTTP " .. code .. "): " .. api_message(body, raw))
end

function usage(config_json, input_json)
  local cfg, input = json_table(config_json) or {}, json_table(input_json) or {}
  local url = base(cfg) .. "/v1/instances/" .. path_id(input) .. "/usage?from=" ..
      urlencode(str(input.from)) .. "&to=" .. urlencode(str(input.to))
  local code, body, raw = call(http_get, url, headers(cfg, false))
  if code < 200 or code > 299 then
    error("usage (HTTP " .. code .. "): " .. api_message(body, raw))
  end
  local items = {}
  if type(body.items) == "table" then
    for _, it in ipairs(body.items) do
      items[#items + 1] = { metric = str(it.metric), quantity = str(it.quantity), unit = str(it.unit) }
    end
  end
  if #items == 0 then
    return '{"items":[]}' -- json_encode would write the empty table as {}
  end
  return json_encode({ items = items })
end
