#!/usr/bin/env bash
# Cross-check of `switchboard bench --scenario send` with wrk (Debian
# package wrk): one node on the database given (a fresh PostgreSQL schema,
# dropped afterwards, or a fresh SQLite file) against the bare net/http
# handler, `wrk -t2 -c64` in alternating rounds, the sends to the
# simulator's two magic numbers as in the bench.
#
#   bench/wrk-send.sh 'postgres://127.0.0.1:5432/test?sslmode=disable' 3 20s
#   bench/wrk-send.sh sqlite 3 20s
#   SWITCHBOARD_BIN=/tmp/old bench/wrk-send.sh ...   # a build of another commit
#
# Prints each round's req/s and the median ratio of the node's to the bare
# handler's. Only 127.0.0.1 is used; every process it starts is stopped.
set -euo pipefail
db=${1:?database: postgres://... or sqlite}
rounds=${2:-3}
dur=${3:-20s}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ -n "${schema:-}" ]]; then psql "$db" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
if [[ -n "${SWITCHBOARD_BIN:-}" ]]; then
  cp "$SWITCHBOARD_BIN" "$dir/switchboard"
else
  go build -o "$dir/switchboard" ./cmd/switchboard
fi
go build -o "$dir/bare" ./bench/bare
if [[ "$db" == postgres* ]]; then
  schema="wrk_$(date +%s)_$$"
  psql "$db" -qc "CREATE SCHEMA $schema"
  sep='?'; [[ "$db" == *\?* ]] && sep='&'
  url="$db${sep}search_path=$schema"
else
  url="sqlite:$dir/switchboard.db"
fi
key=$("$dir/switchboard" tenant create --database "$url" --name wrk --plan scale | sed -n 's/.*"live_key": *"\([^"]*\)".*/\1/p')
[[ -n "$key" ]] || { echo "no key" >&2; exit 1; }
"$dir/switchboard" serve --database "$url" --addr 127.0.0.1:18080 --log-level error >"$dir/serve.log" 2>&1 &
pids+=($!)
"$dir/bare" --addr 127.0.0.1:18081 &
pids+=($!)
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:18080/healthz >/dev/null 2>&1 && curl -fsS -o /dev/null -d '{}' http://127.0.0.1:18081/ 2>/dev/null && break
  sleep 0.1
done
cat >"$dir/send.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $key"
wrk.headers["Content-Type"] = "application/json"
local bodies = {'{"to":"+15005550000","body":"Your order has shipped","channel":"auto"}',
                '{"to":"+15005550004","body":"Your order has shipped","channel":"auto"}'}
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "/v1/messages", nil, bodies[i % 2 + 1])
end
local bad = 0
response = function(status, headers, body)
  if status ~= 202 then bad = bad + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("non-202: %d\n", bad))
end
LUA
rate() { wrk -t2 -c64 -d"$dur" "$@" | tee -a "$dir/wrk.log" | awk '/Requests\/sec/ {print $2}'; }
ratios=()
for r in $(seq "$rounds"); do
  b=$(rate http://127.0.0.1:18081/)
  s=$(rate -s "$dir/send.lua" http://127.0.0.1:18080)
  ratio=$(awk -v s="$s" -v b="$b" 'BEGIN {printf "%.3f", s / b}')
  ratios+=("$ratio")
  echo "round $r: bare $b req/s; send $s req/s; ratio $ratio"
done
grep -h "non-202" "$dir/wrk.log" | sort | uniq -c
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio " a[int((NR+1)/2)] " over " NR " rounds"}'
