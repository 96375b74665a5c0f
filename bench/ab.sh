#!/usr/bin/env bash
# Compare builds of the server in alternating runs of `switchboard bench`, on
# a machine whose speed drifts: a single run of each says little, N
# alternating pairs say more.
#
#   go build -o /tmp/a ./cmd/switchboard   # on one commit
#   go build -o /tmp/b ./cmd/switchboard   # on the other
#   bench/ab.sh 3 "/tmp/a bench --scenario send --duration 20s" "/tmp/b bench --scenario send --duration 20s"
#
# Each line: which command (1, 2, ...), the bare handler's req/s, the
# headline, the process CPU per request of each target (bare first) and the
# group-commit line of that run. The CPU per request varies less from run
# to run than the ratio does.
set -euo pipefail
n=$1
shift
for i in $(seq 1 "$n"); do
  k=0
  for c in "$@"; do
    k=$((k + 1))
    out=$(bash -c "$c" 2>/dev/null)
    bare=$(echo "$out" | awk '/^bare/ {print $5}')
    cpu=$(echo "$out" | awk '/^[a-z][a-z\/ ]*(\([^)]*\))? +[0-9]+ +[0-9]+ / {printf "%s%s", sep, $(NF-1); sep="/"}')
    med=$(echo "$out" | grep -o "median ratio [0-9.]* (min [0-9.]*, max [0-9.]*)" | head -1 || true)
    gc=$(echo "$out" | grep -o "group commit: [0-9]* transactions, [0-9.]* writes" || true)
    echo "pair $i, command $k: bare ${bare:-?} req/s; ${med:-no median}; cpu us/req ${cpu:-?}; ${gc:-}"
  done
done
