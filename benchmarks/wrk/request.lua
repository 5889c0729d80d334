-- wrk script for the benchmarks: the request comes from the environment, the result is one JSON line.
--   WRK_METHOD, WRK_BODY, WRK_HEADERS ("Name: value" lines)  the request (path: the URL's)
--   WRK_UNIQUE_KEY=<prefix>  send "Idempotency-Key: <prefix>-<thread>-<n>", unique per request
--   WRK_UNIQUE_BODY=1        replace "__N__" in the body with "t<thread>n<n>", unique per request
local counter = 0
thread_id = 0  -- set per thread by setup()
local threads = {}
local unique_prefix = os.getenv("WRK_UNIQUE_KEY")
local body_template = os.getenv("WRK_BODY")
local unique_body = os.getenv("WRK_UNIQUE_BODY") == "1"

wrk.method = os.getenv("WRK_METHOD") or "GET"
wrk.body = body_template
for line in string.gmatch(os.getenv("WRK_HEADERS") or "", "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  if name then wrk.headers[name] = value end
end

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_id", #threads)
end

function request()
  if unique_prefix == nil and not unique_body then
    return wrk.format()
  end
  counter = counter + 1
  if unique_prefix ~= nil then
    wrk.headers["Idempotency-Key"] = unique_prefix .. "-" .. thread_id .. "-" .. counter
  end
  if unique_body then
    local body = string.gsub(body_template, "__N__", "t" .. thread_id .. "n" .. counter)
    return wrk.format(nil, nil, nil, body)
  end
  return wrk.format()
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '\nWRK_JSON {"requests": %d, "duration_us": %d, "non_2xx_3xx": %d, "connect_errors": %d,'
      .. ' "read_errors": %d, "write_errors": %d, "timeouts": %d, "p50_us": %d, "p99_us": %d,'
      .. ' "mean_us": %.1f, "max_us": %d}\n',
    summary.requests, summary.duration, errors.status, errors.connect, errors.read, errors.write,
    errors.timeout, latency:percentile(50), latency:percentile(99), latency.mean, latency.max))
end
