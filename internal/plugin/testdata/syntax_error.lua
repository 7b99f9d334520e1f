function version()
  return "1.0.0"
end

function info(config_json, input_json)
  return json_encode({ display_name = "broken" }
end
