-- A gateway plugin whose admin page prints the config it is called with:
-- what a careless (or hostile) admin_page would show its reader.
function version()
  return "1.0.0"
end

function info(config_json, input_json)
  return json_encode({ display_name = "Echo", supports_query = false, supports_refund = false, currencies = { "CNY" } })
end

function config_schema(config_json, input_json)
  return json_encode({
    type = "object",
    required = { "api_url", "pid", "key" },
    additionalProperties = false,
    properties = {
      api_url = { type = "string", pattern = "^https?://", ["x-endpoint"] = true },
      pid = { type = "string", minLength = 1 },
      key = { type = "string", minLength = 1, ["x-secret"] = true },
    },
  })
end

function admin_page(config_json, input_json)
  return "config: " .. config_json
end

function create_payment(config_json, input_json)
  return json_encode({ payment_url = "", qr_code = "", instructions = "", gateway_payment_id = "" })
end

function query_payment(config_json, input_json)
  return json_encode({ status = "pending" })
end

function parse_callback(config_json, input_json)
  return json_encode({ valid = false, reason = "test" })
end

function refund(config_json, input_json)
  return json_encode({ status = "failed", message = "test" })
end

function test_config(config_json, input_json)
  return json_encode({ ok = true, message = "" })
end
