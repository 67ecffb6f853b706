# shellcheck shell=bash
# scripts/bench --routes-load: the per-message cost of routing. Sourced by
# scripts/bench after its MariaDB and build are up; uses its helpers (sql,
# new_db, run_dedupd, start_mock, field, dd_rate, expect, end_state_ok, say,
# rounds) and its variables (WORK, BUILD, DEDUPD, DDTK, BROKERS,
# SOCK, MESSAGES, WORKERS, BATCH, INFLIGHT, LANE_KEY, FETCH_PROP, REPEAT).
#
# One stream of payments (scripts/gen-payments.py, ~50% duplicates), each
# message put on partition (order number mod 32), so that every copy of a
# payment lands on one partition. The same stream is consumed
#   (a) by one route over one topic of 32 partitions (table dedup_r0);
#   (b) by 32 routes, route i over topic rt<i> of one partition, which holds
#       what (a)'s partition i holds, with its own dedup table dedup_r<i>:
# 32 partitions either way, each route of (b) 1/32 of the stream. Both with
# the no-op handler (dedupd's own cost) and with the ledger (a table_prefix
# of r<i>_ per route: 32 sets of the ledger's tables), one run of each per
# round, a fresh database and consumer group each run.

ROUTES_N=32
# The mock keeps about 5 MB a partition; ~250 bytes a message, 32 partitions.
ROUTES_MAX_MESSAGES=576000

# routes_conf NAME DB GROUP HANDLER TOPIC...: $WORK/NAME.conf, one route per
# TOPIC (route r<i> on the i-th, table dedup_r<i>); HANDLER noop or ledger.
routes_conf() {
  local name=$1 db=$2 group=$3 handler=$4 i=0 t path hconf sep=
  shift 4
  path=$BUILD/bench/bench_noop.so
  [[ $handler == ledger ]] && path=$BUILD/examples/ledger.so
  {
    cat <<CONF
kafka = { brokers = "$BROKERS"; group = "$group";
          properties = ["session.timeout.ms=6000", "max.poll.interval.ms=10000", "$FETCH_PROP"]; };
mysql = { socket = "$SOCK"; user = "root"; database = "$db"; };
batch = { max_messages = $BATCH; max_wait_ms = 20; max_inflight = $INFLIGHT; };
workers = $WORKERS;
log = { level = "warn"; };
CONF
    printf 'routes = ('
    for t in "$@"; do
      hconf=
      [[ $handler == ledger ]] && hconf="config = { table_prefix = \"r${i}_\"; };"
      printf '%s\n  { name = "r%d"; topics = ["%s"]; table = "dedup_r%d"; ttl = "7d";\n' "$sep" "$i" "$t" "$i"
      # shellcheck disable=SC2016 # the key template's ${...} are dedupd's
      printf '    key = "pay:${merchant_id}:${order_no}"; %s\n' "${LANE_KEY:+lane_key = \"$LANE_KEY\";}"
      printf '    handler = { path = "%s"; %s }; }' "$path" "$hconf"
      sep=,
      i=$((i + 1))
    done
    printf '\n);\n'
  } >"$WORK/$name.conf"
}

# routes_topics CASE: the topics of case a (one) or b (rt0 .. rt31).
routes_topics() {
  if [[ $1 == a ]]; then echo one; else seq -f 'rt%g' 0 $((ROUTES_N - 1)); fi
}

# routes_stream: the stream, produced to topic one (32 partitions) and split
# over rt0..rt31; $WORK/routes.keys: "i keys" of route i in (b).
routes_stream() {
  local i
  python3 scripts/gen-payments.py --keys $((MESSAGES / 2)) --dup-min 1 --dup-max 3 \
    --partitions 1 --seed 42 |
    awk -F'\t' -v OFS='\t' -v n="$ROUTES_N" '{
      match($3, /"order_no" *: *"P[0-9]+"/); o = substr($3, RSTART, RLENGTH); gsub(/[^0-9]/, "", o)
      $1 = (o + 0) % n; print }' >"$WORK/routes.txt"
  "$DDTK" produce -b "$BROKERS" -t one <"$WORK/routes.txt" 2>>"$WORK/ddtk.log"
  for ((i = 0; i < ROUTES_N; i++)); do
    awk -F'\t' -v OFS='\t' -v p="$i" '$1 == p { $1 = 0; print }' "$WORK/routes.txt" |
      "$DDTK" produce -b "$BROKERS" -t "rt$i" 2>>"$WORK/ddtk.log"
  done
  awk -F'\t' '{ match($3, /"order_no" *: *"P[0-9]+"/); o = substr($3, RSTART, RLENGTH)
      gsub(/[^0-9]/, "", o); if (!((o + 0) in k)) { k[o + 0] = 1; n[$1]++ } }
    END { for (p in n) print p, n[p] }' \
    "$WORK/routes.txt" | sort -n >"$WORK/routes.keys"
  say "Produced $(wc -l <"$WORK/routes.txt") messages to one (32 partitions) and to rt0..rt31 (1 each)"
}

# routes_run NAME CASE HANDLER: one first pass into a fresh database.
routes_run() {
  local name=$1 topics
  mapfile -t topics < <(routes_topics "$2")
  new_db "$name"
  routes_conf "$name" "$name" "rl-$name" "$3" "${topics[@]}"
  "$DEDUPD" migrate -c "$WORK/$name.conf" >/dev/null 2>>"$WORK/dedupd.log"
  run_dedupd "$name"
}

# routes_check NAME CASE HANDLER: the end state of run NAME: every route's
# table holds exactly its keys (their number, and none of another route's),
# the ledger's rows likewise, and the group's offsets at every end.
routes_check() {
  local name=$1 i=0 t want n=$ROUTES_N keys=$((MESSAGES / 2)) q
  expect "$name applied" "$(field "$WORK/$name.summary" applied)" "$keys"
  expect "$name dead letters" "$(field "$WORK/$name.summary" dead_letters)" 0
  for t in $(routes_topics "$2"); do
    want=$keys
    [[ $2 == b ]] && want=$(awk -v i="$i" '$1 == i { print $2 }' "$WORK/routes.keys")
    [[ $2 == a ]] && n=1
    # The order number of a key, and the route it belongs to.
    q="CAST(SUBSTRING_INDEX(biz_key, ':P', -1) AS UNSIGNED) % $n <> $i"
    expect "$name route r$i applied" "$(grep "^summary_route route=r$i " "$WORK/$name.summary" |
      tr ' ' '\n' | awk -F= '$1 == "applied" { print $2 }')" "$want"
    expect "$name dedup_r$i" "$(sql "$name" -e "SELECT COUNT(*) FROM dedup_r$i WHERE status = 1")" "$want"
    expect "$name dedup_r$i foreign keys" "$(sql "$name" -e "SELECT COUNT(*) FROM dedup_r$i WHERE $q")" 0
    if [[ $3 == ledger ]]; then
      expect "$name r${i}_ledger_entry" "$(sql "$name" -e "SELECT COUNT(*) FROM r${i}_ledger_entry")" "$want"
      expect "$name r$i balances minus entries" "$(sql "$name" -e "SELECT (SELECT COALESCE(SUM(
        balance_cents), 0) FROM r${i}_merchant_balance) - (SELECT COALESCE(SUM(amount_cents), 0)
        FROM r${i}_ledger_entry)")" 0
    fi
    expect "$name $t offsets committed" "$(routes_uncommitted "rl-$name" "$t")" 0
    i=$((i + 1))
  done
}

# routes_uncommitted GROUP TOPIC: the partitions of TOPIC whose committed
# offset of GROUP is not the high watermark.
routes_uncommitted() {
  awk 'NR == FNR { c[$1] = $2; next } c[$1] != $3 { bad++ } END { print bad + 0 }' \
    <("$DDTK" committed -b "$BROKERS" -g "$1" -t "$2" 2>>"$WORK/ddtk.log") \
    <("$DDTK" watermarks -b "$BROKERS" -t "$2" 2>>"$WORK/ddtk.log")
}

# routes_us NAME WHICH: NAME's CPU per message in us, WHICH own_s or db_s.
routes_us() {
  echo "$(field "$WORK/$1.cpu" "$2") * 1000000 / $(field "$WORK/$1.summary" messages)" | bc -l
}

# routes_row ROUND HANDLER: the table row of round ROUND's a and b runs.
routes_row() {
  local a=$2_a$1 b=$2_b$1
  awk -v r="$1" -v h="$2" -v ra="$(dd_rate "$a")" -v rb="$(dd_rate "$b")" \
    -v oa="$(routes_us "$a" own_s)" -v da="$(routes_us "$a" db_s)" \
    -v ob="$(routes_us "$b" own_s)" -v db="$(routes_us "$b" db_s)" \
    -v ma="$(cat "$WORK/$a.rss")" -v mb="$(cat "$WORK/$b.rss")" 'BEGIN {
    printf "| %-7s | %5d | %9d | %9d | %7.2f | %27s | %13s | %11.2f | %21s |\n",
      h, r, ra, rb, rb / ra, sprintf("%.1f + %.1f", oa, da), sprintf("%.1f + %.1f", ob, db),
      (ob + db) / (oa + da), sprintf("%d / %d", ma / 1024, mb / 1024) }' \
    >>"$WORK/routes-$2.rows"
}

# routes_main: --routes-load.
routes_main() {
  local i h c
  if ((MESSAGES > ROUTES_MAX_MESSAGES)); then
    echo "bench: --routes-load keeps the stream on 32 partitions of about 5 MB: at most" \
      "$ROUTES_MAX_MESSAGES messages, not $MESSAGES" >&2
    exit 2
  fi
  start_mock "one:$ROUTES_N" $(seq -f "rt%g:1" 0 $((ROUTES_N - 1)))
  routes_stream
  say "warm-up: (a) with the no-op handler into a scratch database (not measured)"
  routes_run warm a noop
  sql -e "DROP DATABASE warm"
  say "(a) 1 route, (b) $ROUTES_N routes: $(rounds "$REPEAT") of each, no-op handler and ledger"
  for i in $(seq "$REPEAT"); do
    for h in noop ledger; do
      for c in a b; do
        routes_run "${h}_$c$i" "$c" "$h"
        routes_check "${h}_$c$i" "$c" "$h"
        sql -e "DROP DATABASE ${h}_$c$i"
      done
      say "round $i, $h: (a) $(dd_rate "${h}_a$i"), (b) $(dd_rate "${h}_b$i") msg/s"
      routes_row "$i" "$h"
    done
  done
  end_state_ok "routes figures"
  routes_report | tee "$WORK/report.txt"
}

# routes_median COLUMN HANDLER: the median of a column of HANDLER's rows.
routes_median() {
  awk -F'|' -v c="$1" '{ print $c + 0 }' "$WORK/routes-$2.rows" | sort -n |
    awk '{ v[NR] = $1 } END { printf "%.2f\n", v[int((NR + 1) / 2)] }'
}

# routes_report: the table of every round, and the median ratios.
routes_report() {
  local h
  echo
  echo "dedupd bench --routes-load: $(field "$WORK/noop_a1.summary" messages) messages" \
    "($((MESSAGES / 2)) keys), $WORKERS workers, batch $BATCH, $(nproc) cores;" \
    "(a) 1 route, 1 topic of 32 partitions; (b) 32 routes, 32 topics of 1 partition"
  echo "| handler | round | (a) msg/s | (b) msg/s | (b)/(a) | (a) us/msg dedupd + MariaDB | (b) us/msg    | CPU (b)/(a) | peak RSS MB (a) / (b) |"
  echo "|---------|------:|----------:|----------:|--------:|----------------------------:|--------------:|------------:|----------------------:|"
  for h in noop ledger; do cat "$WORK/routes-$h.rows"; done
  for h in noop ledger; do
    printf '  %s: (b)/(a) msg/s median %s, CPU per message median %s\n' "$h" \
      "$(routes_median 6 "$h")" "$(routes_median 9 "$h")"
  done
}
