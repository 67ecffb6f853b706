# shellcheck shell=bash
# scripts/bench --http-load: the HTTP handler's calls per second against
# the reference service (examples/http-service/service.py) answering every
# POST after a fixed 50 ms. Sourced by scripts/bench after its MariaDB and
# build are up; uses its helpers (sql, new_db, start_mock, say) and its
# variables (WORK, BUILD, DEDUPD, DDTK, BROKERS, SOCK, REPEAT).
#
# For 4, 16 and 64 calls in flight, each as a ratio to the limit (calls in
# flight / 50 ms):
#   - the service's own ceiling: a plain client (bench/http-client.py, that
#     many threads with a kept-alive connection each) for 5 s, first with
#     no delay at all (what the service takes), then with the 50 ms;
#   - dedupd: workers x external.in_flight of 1x4, 4x4 and 8x8 (HTTP_SHAPES),
#     a stream of 6 s worth of distinct payments at the limit, the rate the
#     service saw (its request log: POSTs over the time from the first to
#     the last).
# Every payment must be applied once at the service and in the dedup table
# before a figure is printed.

HTTP_DELAY_MS=50
# Calls in flight as workers x external.in_flight: up to 8 a worker, so a
# worker's claims and finishes (two transactions a message, on its one
# connection) keep up with its calls.
HTTP_SHAPES=${HTTP_SHAPES:-"4:1x4 16:4x4 64:8x8"}

# http_service NAME DELAY_MS: the service on a free port, its journal and
# request log in $WORK/NAME.*; sets HTTP_URL and HTTP_PID.
http_service() {
  local port
  # shellcheck source=../scripts/lib/ports.sh
  source scripts/lib/ports.sh
  port=$(dd_free_ports 1)
  rm -f "$WORK/$1.journal" "$WORK/$1.requests"
  /usr/bin/python3 examples/http-service/service.py --listen "127.0.0.1:$port" \
    --journal "$WORK/$1.journal" --log "$WORK/$1.requests" --delay-ms "$2" \
    >"$WORK/$1.service.log" 2>&1 &
  HTTP_PID=$!
  for _ in $(seq 100); do grep -q '^listening' "$WORK/$1.service.log" && break; sleep 0.1; done
  HTTP_URL="http://127.0.0.1:$port/payments"
}

http_stop() { kill "$HTTP_PID" 2>/dev/null && wait "$HTTP_PID" 2>/dev/null || true; }

# http_ticks: the service's CPU time so far, in clock ticks.
http_ticks() { awk '{ print $14 + $15 }' "/proc/$HTTP_PID/stat"; }

# http_client CONCURRENCY DELAY_MS: the plain client's calls per second.
http_client() {
  http_service "client-$1-$2" "$2"
  /usr/bin/python3 bench/http-client.py "$HTTP_URL" "$1" 5
  http_stop
}

# http_dedupd IN_FLIGHT WORKERS: dedupd's calls per second with that many
# in flight over WORKERS workers; checks the end state first. It runs in a
# command substitution, so it stops its own mock cluster: scripts/bench's
# cleanup knows only its shell's.
http_dedupd() {
  local f=$1 w=$2 n=$((6 * $1 * 1000 / HTTP_DELAY_MS)) name=dd-$1 rate d0 s0 cpu dd_s db_t svc_t
  start_mock "h$f:4"
  seq 1 "$n" | awk '{ printf "%d\t-\t{\"merchant_id\":\"m%d\",\"order_no\":\"o%d\",\"amount\":\"1.00\"}\n", $1 % 4, $1 % 97, $1 }' |
    "$DDTK" produce -b "$BROKERS" -t "h$f" 2>>"$WORK/ddtk.log"
  http_service "$name" "$HTTP_DELAY_MS"
  cat >"$WORK/$name.conf" <<CONF
kafka = { brokers = "$BROKERS"; group = "g$f"; topics = ["h$f"];
          properties = ["session.timeout.ms=6000", "max.poll.interval.ms=10000", "$FETCH_PROP"]; };
mysql = { socket = "$SOCK"; user = "root"; database = "h$f"; };
dedup = { key = "pay:\${merchant_id}:\${order_no}"; ttl = "7d"; };
handler = { http = { url = "$HTTP_URL"; timeout = "10s"; }; };
external = { lease = "30s"; scan_interval = "0"; in_flight = $((f / w)); };
workers = $w;
log = { level = "warn"; };
CONF
  new_db "h$f"
  "$DEDUPD" migrate -c "$WORK/$name.conf" >/dev/null 2>>"$WORK/dedupd.log"
  d0=$(db_ticks)
  s0=$(http_ticks)
  /usr/bin/time -f '%U %S' -o "$WORK/$name.time" \
    "$DEDUPD" run -c "$WORK/$name.conf" --exit-at-end >>"$WORK/$name.log" 2>&1
  cpu="$(awk '{ print $1 + $2 }' "$WORK/$name.time") $(($(db_ticks) - d0)) $(($(http_ticks) - s0))"
  http_stop
  kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
  MOCK_PID=
  rate=$(/usr/bin/python3 - "$WORK/$name.requests" "$WORK/$name.journal" "$n" <<'PY'
import json, sys
posts = [json.loads(l)["t"] for l in open(sys.argv[1]) if '"POST"' in l]
keys = [r["key"] for r in map(json.loads, open(sys.argv[2])) if r["type"] == "apply"]
n = int(sys.argv[3])
if len(keys) != n or len(set(keys)) != n:
    sys.exit("service applied %d effects for %d keys, not %d once each" % (len(keys), len(set(keys)), n))
print("%.1f" % ((len(posts) - 1) / (max(posts) - min(posts))))
PY
) || { say "http: the end state is wrong for $f in flight"; exit 1; }
  [[ "$(sql -e "SELECT COUNT(*) FROM h$f.dedup_record WHERE status = 1")" == "$n" ]] ||
    { say "http: not every key applied for $f in flight"; exit 1; }
  sql -e "DROP DATABASE h$f"
  read -r dd_s db_t svc_t <<<"$cpu"
  say "http: $f in flight: $rate calls/s; CPU per call: dedupd $(echo "$dd_s * 1000000 / $n" | bc) us," \
    "MariaDB $(echo "$db_t * 1000000 / $TICKS_PER_S / $n" | bc) us, the service" \
    "$(echo "$svc_t * 1000000 / $TICKS_PER_S / $n" | bc) us"
  echo "$rate"
}

http_main() {
  local f w shape limit plain raw dd round
  say "http: the service's ceiling: a plain client, 64 at once, no delay"
  raw=$(http_client 64 0)
  say "http: $raw calls/s"
  printf '\n| round | in flight | workers x in_flight | limit (calls/s) | plain client, 50 ms | ratio | dedupd | ratio |\n'
  printf '|---:|---:|---:|---:|---:|---:|---:|---:|\n'
  for ((round = 1; round <= REPEAT; round++)); do
    for shape in $HTTP_SHAPES; do
      f=${shape%%:*} w=${shape#*:}
      w=${w%%x*}
      limit=$((f * 1000 / HTTP_DELAY_MS))
      plain=$(http_client "$f" "$HTTP_DELAY_MS")
      dd=$(http_dedupd "$f" "$w")
      printf '| %d | %d | %s | %d | %s | %.2f | %s | %.2f |\n' "$round" "$f" "${shape#*:}" "$limit" \
        "$plain" "$(echo "$plain / $limit" | bc -l)" "$dd" "$(echo "$dd / $limit" | bc -l)"
    done
  done
  printf '\nThe service alone, 64 clients, no delay: %s calls/s\n' "$raw"
}
