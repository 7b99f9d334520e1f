-- A small gateway, the shape of the shipped ones: decode the input, sign,
-- encode the answer. Used by the concurrency test and the benchmarks.

function version()
  return "1.2.3"
end

function info(config_json, input_json)
  return json_encode({
    display_name = "Test gateway",
    description = "signs with md5",
    supports_query = true,
    supports_refund = false,
  })
end

function config_schema(config_json, input_json)
  return json_encode({ type = "object", required = { "key" } })
end

function create_payment(config_json, input_json)
  local cfg = json_decode(config_json)
  local input = json_decode(input_json)
  local sign = md5(input.payment_id .. "|" .. input.amount .. "|" .. cfg.key)
  return json_encode({
    payment_url = cfg.base_url .. "/pay/" .. input.payment_id,
    qr_code = "",
    instructions = "",
    gateway_payment_id = "gw_" .. input.payment_id,
    sign = sign,
  })
end

function query_payment(config_json, input_json)
  return json_encode({ status = "pending" })
end

function parse_callback(config_json, input_json, extra)
  return json_encode({ valid = false, reason = "not implemented" })
end

function refund(config_json, input_json)
  return json_encode({ status = "failed", message = "not supported" })
end

function test_config(config_json, input_json)
  return json_encode({ ok = true, message = "" })
end

function admin_page(config_json, input_json)
  return "nothing to show"
end

-- not a contract function: Call must refuse it
function helper(a, b)
  return "{}"
end
