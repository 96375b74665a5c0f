-- send.lua: the send scenario's requests for wrk, the cross-check of the Go
-- load generator (bench/loadgen). `switchboard bench --scenario send
-- --loadgen wrk` runs it against the bare handler and against the server:
--
--   SWITCHBOARD_BENCH_KEY=svc_live_... wrk -t2 -c64 -d20s --latency -s bench/wrk/send.lua http://127.0.0.1:8080
--
-- Each request is POST /v1/messages with the live key of a Scale tenant (no
-- rate limit, no quota) to a simulator number that is always delivered,
-- alternating the two the Go scenario uses (+15005550000 resolves `auto` to
-- chat, +15005550004 to sms). No Idempotency-Key: every request is a new
-- message, as in the Go scenario. The bare handler answers any request 200.
--
-- When done it prints one line that `switchboard bench` reads:
--   SWITCHBOARD_WRK requests=N duration_us=N errors=N status_errors=N p50_us=N p90_us=N p99_us=N max_us=N

local key = os.getenv("SWITCHBOARD_BENCH_KEY")
local recipients = { "+15005550000", "+15005550004" }
local bodies = {}
for i, to in ipairs(recipients) do
  bodies[i] = '{"to":"' .. to .. '","body":"Your order has shipped","channel":"auto"}'
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if key ~= nil and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end

local n = 0

request = function()
  n = n + 1
  return wrk.format(nil, "/v1/messages", nil, bodies[n % #bodies + 1])
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "SWITCHBOARD_WRK requests=%d duration_us=%d errors=%d status_errors=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
