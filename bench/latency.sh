# shellcheck shell=bash
# scripts/bench --latency: send -> applied latency under a steady load, with
# the test bed's floor measured in the same run. Sourced by scripts/bench
# after its set-up (MariaDB at $SOCK, $DEDUPD, $BUILD, $WORK, start_mock,
# sql, field, say, expect, end_state_ok); BENCHMARKS.md, "Latency under a
# steady load", has the figures and how to read them.
#
# For each rate of LAT_RATES, on a fresh topic and database: dedupd run
# (the bench_latency handler, dedupd's defaults but for fetch.wait.max.ms)
# and bench-latency (the paced producer and the floor consumer) run at the
# same time on the same stream, so dedupd and the floor share the machine's
# load second by second. The producer sends LAT_SECONDS of payments at the
# rate, 30% of them redelivered copies, after a warm-up that is not
# measured; once dedupd has applied every payment it is stopped (SIGTERM)
# and its rows give send -> applied for every payment sent after the
# warm-up.
#
# Inputs: LAT_RATES (comma-separated msg/s), LAT_SECONDS, LAT_FETCH_WAIT
# (fetch.wait.max.ms of both consumers), LAT_MAX_WAIT (batch.max_wait_ms,
# empty: dedupd's default), LAT_LINGER (the producer's linger.ms, empty:
# see lat_run), WORKERS, LANE_KEY.
#
# The mock cluster answers a fetch with one produced batch per partition
# at most, and only when fetch.wait.max.ms has passed. A producer that sends
# more batches a second to a partition than a consumer fetches leaves every
# consumer further behind each second, the floor too, and the figures then
# measure that. So the producer lingers twice the fetch wait by default
# (and at least 5 ms, librdkafka's default): both consumers then keep up,
# and the linger, spent before the send is acknowledged and after the
# payload is stamped, is in both figures alike.

LAT_PARTS=8
LAT_WARMUP=3

# lat_pcts: p50 p99 max, in ms, of the microsecond values on stdin.
lat_pcts() {
  sort -n | awk '{ v[NR] = $1 } END {
    if (!NR) { print "- - -"; exit }
    i50 = int(NR * 0.50) + 1; i99 = int(NR * 0.99) + 1
    if (i50 > NR) i50 = NR; if (i99 > NR) i99 = NR
    printf "%.1f %.1f %.1f\n", v[i50] / 1000, v[i99] / 1000, v[NR] / 1000 }'
}

# lat_conf NAME DATABASE TOPIC -> $WORK/NAME.conf
lat_conf() {
  local batch=""
  [[ -n "$LAT_MAX_WAIT" ]] && batch="batch = { max_wait_ms = $LAT_MAX_WAIT; };"
  cat >"$WORK/$1.conf" <<CONF
kafka = { brokers = "$BROKERS"; group = "lat-$1"; topics = ["$3"];
          properties = ["session.timeout.ms=6000", "fetch.wait.max.ms=$LAT_FETCH_WAIT"]; };
mysql = { socket = "$SOCK"; user = "root"; database = "$2"; };
dedup = { key = "pay:\${merchant_id}:\${order_no}"; ttl = "7d";
          ${LANE_KEY:+lane_key = \"$LANE_KEY\";} };
handler = { path = "$BUILD/bench/bench_latency.so"; };
$batch
workers = $WORKERS;
log = { level = "info"; };
CONF
}

# lat_wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 if it never did.
lat_wait_for() {
  local until=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < until)) || return 1
    sleep 0.2
  done
}

lat_assigned() { grep -q 'Assigned' "$WORK/$1.log"; }
lat_applied_all() { (($(sql "$1" -e "SELECT COUNT(*) FROM bench_latency") >= $2)); }

# lat_one RATE: one rate's run; appends its row to $WORK/latency.rows.
lat_one() {
  local rate=$1 name="lat$1" pid from payments dd load0
  sql -e "DROP DATABASE IF EXISTS $name; CREATE DATABASE $name"
  lat_conf "$name" "$name" "$name"
  if ! "$DEDUPD" migrate -c "$WORK/$name.conf" >/dev/null 2>>"$WORK/$name.log"; then
    echo "bench: dedupd migrate ($name) failed:" >&2
    tail -n 5 "$WORK/$name.log" >&2
    exit 1
  fi
  settle
  load0=$(cut -d' ' -f1 /proc/loadavg)
  "$DEDUPD" run -c "$WORK/$name.conf" >"$WORK/$name.summary" 2>>"$WORK/$name.log" &
  pid=$!
  if ! lat_wait_for 60 lat_assigned "$name"; then
    echo "bench: dedupd ($name) got no partitions in 60 s; its log:" >&2
    tail -n 20 "$WORK/$name.log" >&2
    exit 1
  fi
  LAT_PID=$pid
  if ! "$BUILD/bench/bench-latency" -b "$BROKERS" -t "$name" -r "$rate" -d "$LAT_SECONDS" \
    -c 0.3 -w "$LAT_FETCH_WAIT" -W "$LAT_WARMUP" -L "$LAT_LINGER" -g "floor-$name" \
    >"$WORK/$name.floor" \
    2>>"$WORK/bench.log"; then
    echo "bench: the floor consumer ($name) did not read every payment: $(cat "$WORK/$name.floor")" >&2
    exit 1
  fi
  from=$(field "$WORK/$name.floor" measure_from_us)
  payments=$(field "$WORK/$name.floor" payments)
  if ! lat_wait_for 120 lat_applied_all "$name" "$payments"; then
    echo "bench: dedupd ($name) did not apply all $payments payments in 120 s" >&2
    exit 1
  fi
  kill -TERM "$pid"
  wait "$pid" || { echo "bench: dedupd ($name) did not stop cleanly" >&2; exit 1; }
  LAT_PID=
  expect "$name rows" "$(sql "$name" -e "SELECT COUNT(*) FROM bench_latency")" "$payments"
  expect "$name applied" "$(field "$WORK/$name.summary" applied)" "$payments"
  expect "$name duplicates" "$(field "$WORK/$name.summary" duplicates)" \
    $(($(field "$WORK/$name.floor" produced) - payments))
  expect "$name dead letters" "$(field "$WORK/$name.summary" dead_letters)" 0
  dd=$(sql "$name" -e "SELECT applied_us - sent_us FROM bench_latency WHERE sent_us >= $from" | lat_pcts)
  printf '%s %s %s %s %s %s %s %s %s %s %s\n' "$rate" "$(field "$WORK/$name.floor" originals)" "$dd" \
    "$(field "$WORK/$name.floor" floor_p50_ms)" "$(field "$WORK/$name.floor" floor_p99_ms)" \
    "$(field "$WORK/$name.floor" floor_max_ms)" "$(field "$WORK/$name.summary" latency_p50_le_ms)" \
    "$(field "$WORK/$name.summary" latency_p99_le_ms)" \
    "$(awk -v m="$(field "$WORK/$name.summary" messages)" -v b="$(field "$WORK/$name.summary" batches)" \
      'BEGIN { printf "%.0f", b ? m / b : 0 }')" \
    "$(field "$WORK/$name.floor" send_late_max_ms)" "$load0" >>"$WORK/latency.rows"
  say "$rate msg/s: dedupd p50/p99/max $dd ms; floor $(field "$WORK/$name.floor" floor_p50_ms)" \
    "$(field "$WORK/$name.floor" floor_p99_ms) $(field "$WORK/$name.floor" floor_max_ms) ms"
  sql -e "DROP DATABASE $name"
}

lat_report() {
  echo
  echo "dedupd latency under a steady load: send -> applied, $LAT_SECONDS s per rate (after a" \
    "${LAT_WARMUP} s warm-up), 30% redelivered copies, $LAT_PARTS partitions, $WORKERS workers," \
    "lane_key '${LANE_KEY:-none}', fetch.wait.max.ms $LAT_FETCH_WAIT, batch.max_wait_ms" \
    "${LAT_MAX_WAIT:-default}, producer linger.ms $LAT_LINGER, $(nproc) cores"
  echo "| msg/s | payments | dedupd p50 ms | p99 ms | max ms | floor p50 ms | p99 ms | max ms |" \
    "poll -> done p50 <= ms | p99 <= ms | msg/batch | producer late max ms | load |"
  echo "|------:|------:|------:|------:|------:|------:|------:|------:|------:|------:|------:|------:|-----:|"
  awk '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 }' "$WORK/latency.rows"
  echo "  dedupd: send -> the handler's write, in the transaction (bench/latency_handler.c); floor: send ->"
  echo "  polled by a consumer that only reads; poll -> done: dedupd's own histogram (poll -> committed,"
  echo "  offset storable), the bound of the bucket holding the quantile; load: the 1-minute load average"
  echo "  when the rate's run began (other processes on this machine)"
}

# On any exit: the running dedupd first, then scripts/bench's cleanup.
LAT_PID=
lat_cleanup() {
  [[ -n "$LAT_PID" ]] && kill "$LAT_PID" 2>/dev/null && wait "$LAT_PID" 2>/dev/null
  cleanup
}

lat_run() {
  local topics=() rate
  local opt var
  for opt in seconds:LAT_SECONDS fetch-wait:LAT_FETCH_WAIT ${LAT_MAX_WAIT:+max-wait:LAT_MAX_WAIT} \
    ${LAT_LINGER:+linger:LAT_LINGER}; do
    var=${opt#*:}
    if [[ ! "${!var}" =~ ^[0-9]+$ ]]; then
      echo "bench: --${opt%%:*} wants a whole number, not '${!var}'" >&2
      exit 2
    fi
  done
  if [[ -z "$LAT_LINGER" ]]; then
    LAT_LINGER=$((2 * LAT_FETCH_WAIT))
    ((LAT_LINGER >= 5)) || LAT_LINGER=5
  fi
  trap lat_cleanup EXIT
  IFS=, read -r -a LAT_RATE_LIST <<<"$LAT_RATES"
  for rate in "${LAT_RATE_LIST[@]}"; do
    if [[ ! "$rate" =~ ^[1-9][0-9]*$ ]]; then
      echo "bench: --rates wants whole numbers above 0, not '$rate'" >&2
      exit 2
    fi
    topics+=("lat$rate:$LAT_PARTS")
  done
  start_mock "${topics[@]}"
  say "Latency: ${LAT_RATES//,/, } msg/s, $LAT_SECONDS s each; dedupd and the floor on the same" \
    "stream at the same time; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
  : >"$WORK/latency.rows"
  for rate in "${LAT_RATE_LIST[@]}"; do lat_one "$rate"; done
  end_state_ok "latency figures"
  lat_report | tee "$WORK/report.txt"
}
