# shellcheck shell=bash
# scripts/bench --prefill and --purge-load: how the cost grows with the
# dedup table. Sourced by scripts/bench after its MariaDB and build are up;
# uses its helpers (sql, new_db, write_conf, run_dedupd, produce, start_mock,
# field, rate, expect, end_state_ok, say) and its variables (WORK, BUILD,
# DEDUPD, SOCK, MESSAGES, WORKERS, BATCH).
#
# The prefill writes the rows the ledger first pass would have left for N
# earlier payments, through INSERT ... SELECT from MariaDB's sequence engine
# (seq_0_to_N), a million rows a statement: dedup_record (status 1, applied,
# a 32-byte request hash, the payment's topic, partition and offset, created
# over the 7 days before now and expiring 7 days after that: the ttl),
# ledger_entry and payment_order (one row each) and merchant_balance (the
# sums). Keys are pay:m<merchant>:<order>, 50 merchants, as scripts/
# gen-payments.py writes them; the order number follows the key shape:
#   time    P<8 digits>, rising with time: every new key lands at the end of
#           its merchant's range of the primary key (50 places in all);
#   random  a random UUID (from MD5 of the row number): a new key lands
#           anywhere in the primary key.
# The measured stream has the same shape and numbers its orders from
# 90,000,000 (above every prefilled one). The server's buffer pool is
# raised to GROW_LOAD_POOL for the load and set back to the measured size
# (--buffer-pool) before the measured passes.

GROW_LOAD_POOL=${GROW_LOAD_POOL:-4G}
GROW_CHUNK=1000000
GROW_FIRST_KEY=90000000

# grow_status: the InnoDB counters the report compares, one NAME VALUE a line.
grow_status() {
  sql -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_reads',
    'Innodb_buffer_pool_read_requests', 'Innodb_data_reads', 'Innodb_data_writes',
    'Innodb_row_lock_time_max', 'Innodb_row_lock_waits', 'Innodb_row_lock_time')"
}

# grow_delta BEFORE AFTER NAME: AFTER's NAME minus BEFORE's.
grow_delta() {
  awk -v n="$3" 'NR == FNR { if ($1 == n) b = $2; next } $1 == n { print $2 - b }' "$1" "$2"
}

# grow_pool SIZE: resizes the buffer pool online and waits until it is done.
grow_pool() {
  local want
  want=$(numfmt --from=iec "$1")
  sql -e "SET GLOBAL innodb_buffer_pool_size = $want"
  for _ in $(seq 600); do
    [[ $(sql -e "SELECT @@innodb_buffer_pool_size = $want AND COALESCE((SELECT VARIABLE_VALUE
      FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_RESIZE_STATUS'
      AND VARIABLE_VALUE LIKE 'Resizing%'), '') = ''") == 1 ]] && return 0
    sleep 0.5
  done
}

# grow_gen_shape SHAPE: scripts/gen-payments.py's --order-shape for SHAPE.
grow_gen_shape() { if [[ $1 == time ]]; then echo seq; else echo uuid; fi; }

# grow_order SHAPE: the SQL expression of the order number of row `seq`.
grow_order() {
  if [[ $1 == time ]]; then
    echo "CONCAT('P', LPAD(seq, 8, '0'))"
  else
    echo "CONCAT_WS('-', SUBSTR(MD5(seq), 1, 8), SUBSTR(MD5(seq), 9, 4),
      CONCAT('4', SUBSTR(MD5(seq), 14, 3)), CONCAT('a', SUBSTR(MD5(seq), 18, 3)),
      SUBSTR(MD5(seq), 21, 12))"
  fi
}

# grow_prefill DB N SHAPE AGE_S: N payments already applied in DB (migrated),
# created over the 7 days before now - AGE_S (AGE_S = 8 days: a day of
# expired rows). Leaves the seconds it took in $WORK/prefill.s.
grow_prefill() {
  local db=$1 n=$2 shape=$3 age=$4 t0 lo hi order created
  t0=$(date +%s.%N)
  order=$(grow_order "$shape")
  # Row seq of N: created at now - age - 7 days * (N - seq) / N.
  created="NOW(6) - INTERVAL $age SECOND - INTERVAL (($n - seq) * 604800000000 DIV $n) MICROSECOND"
  grow_pool "$GROW_LOAD_POOL"
  for ((lo = 0; lo < n; lo += GROW_CHUNK)); do
    hi=$((lo + GROW_CHUNK < n ? lo + GROW_CHUNK - 1 : n - 1))
    sql "$db" -e "SET unique_checks = 0; START TRANSACTION;
      INSERT INTO dedup_record (biz_key, request_hash, status, attempts, topic, kpartition,
        koffset, created_at, updated_at, expire_at)
      SELECT CONCAT('pay:m', LPAD(seq % 50 + 1, 3, '0'), ':', $order), UNHEX(SHA2(seq, 256)), 1, 1,
        'bench', seq % 16, seq DIV 16, $created, $created, $created + INTERVAL 7 DAY
      FROM seq_${lo}_to_${hi};
      INSERT INTO ledger_entry (merchant_id, order_no, txn_id, amount_cents, currency, biz_key,
        created_at)
      SELECT CONCAT('m', LPAD(seq % 50 + 1, 3, '0')), $order, CONCAT('T2024', LPAD(seq, 16, '0')),
        seq % 99999 + 1, 'CNY', CONCAT('pay:m', LPAD(seq % 50 + 1, 3, '0'), ':', $order), $created
      FROM seq_${lo}_to_${hi};
      INSERT INTO payment_order (merchant_id, order_no, status, txn_id, amount_cents, updated_at)
      SELECT CONCAT('m', LPAD(seq % 50 + 1, 3, '0')), $order, 'PAID',
        CONCAT('T2024', LPAD(seq, 16, '0')), seq % 99999 + 1, $created
      FROM seq_${lo}_to_${hi};
      COMMIT"
  done
  sql "$db" -e "INSERT INTO merchant_balance (merchant_id, currency, balance_cents, entries)
    SELECT CONCAT('m', LPAD(seq % 50 + 1, 3, '0')), 'CNY', SUM(seq % 99999 + 1), COUNT(*)
    FROM seq_0_to_$((n - 1)) GROUP BY seq % 50"
  echo "$(date +%s.%N) - $t0" | bc >"$WORK/prefill.s"
  grow_pool "$POOL"
}

# grow_size DB: "rows data_MB index_MB ibd_MB" of DB's dedup_record.
grow_size() {
  sql -e "ANALYZE TABLE $1.dedup_record" >/dev/null
  printf '%s %s\n' "$(sql -e "SELECT table_rows, ROUND(data_length / 1048576),
    ROUND(index_length / 1048576) FROM information_schema.tables
    WHERE table_schema = '$1' AND table_name = 'dedup_record'")" \
    "$(($(stat -c %s "$WORK/db/data/$1/dedup_record.ibd") / 1048576))"
}

# grow_pass NAME DB GROUP TOPIC [PURGE_INTERVAL]: one dedupd run of the
# ledger, with the InnoDB counters before and after ($WORK/NAME.st0/.st1).
grow_pass() {
  write_conf "$1" "$2" "$3" "$4" "$WORKERS" "$BATCH"
  echo "purge = { interval = \"${5:-0}\"; };" >>"$WORK/$1.conf"
  settle
  grow_status >"$WORK/$1.st0"
  run_dedupd "$1"
  grow_status >"$WORK/$1.st1"
}

# grow_line LABEL NAME BASE: a table row for run NAME, its rate against BASE's.
grow_line() {
  local m s0=$WORK/$2.st0 s1=$WORK/$2.st1
  m=$(field "$WORK/$2.summary" messages)
  awk -v l="$1" -v r="$(dd_rate "$2")" -v b="$(dd_rate "$3")" -v m="$m" \
    -v br="$(grow_delta "$s0" "$s1" Innodb_buffer_pool_reads)" \
    -v rq="$(grow_delta "$s0" "$s1" Innodb_buffer_pool_read_requests)" \
    -v dr="$(grow_delta "$s0" "$s1" Innodb_data_reads)" -v p99="$(field "$WORK/$2.summary" latency_p99_le_ms)" 'BEGIN {
    printf "| %-18s | %8d | %5.2f | %10.3f | %10.1f | %10.3f | %6s |\n", l, r, r / b, br / m, rq / m, dr / m, p99 }'
}

grow_header() {
  echo "| run                |    msg/s | ratio | pool reads | read reqs  | data reads | p99 ms |"
  echo "|--------------------|----------|-------|------------|------------|------------|--------|"
}

# grow_shape SHAPE: the series over PREFILL's sizes for one key shape.
grow_shape() {
  local shape=$1 n db keys=$((MESSAGES / 2)) base=
  start_mock "grow:$PARTS"
  produce grow "$PARTS" "$MESSAGES" 42 "$GROW_FIRST_KEY" "$(grow_gen_shape "$shape")"
  : >"$WORK/grow-$shape.rows"
  : >"$WORK/grow-$shape.sizes"
  for n in ${PREFILL//,/ }; do
    db=grow_${shape}_$n
    new_db "$db" migrate
    if ((n > 0)); then
      say "prefill: $n $shape-ordered keys into $db (pool $GROW_LOAD_POOL for the load)"
      grow_prefill "$db" "$n" "$shape" 0
      echo "$n $(cat "$WORK/prefill.s") $(grow_size "$db")" >>"$WORK/grow-$shape.sizes"
      say "prefill: $n rows in $(xargs printf '%.0f' <"$WORK/prefill.s") s; dedup_record $(grow_size "$db") (rows data MB index MB .ibd MB)"
    fi
    say "$shape keys, N = $n: first pass, then the replay (pool $POOL)"
    grow_pass "g-$shape-$n" "$db" "grow-first-$shape-$n" grow
    grow_pass "r-$shape-$n" "$db" "grow-replay-$shape-$n" grow
    base=${base:-$n}
    grow_line "first, N = $n" "g-$shape-$n" "g-$shape-$base" >>"$WORK/grow-$shape.rows"
    grow_line "replay, N = $n" "r-$shape-$n" "r-$shape-$base" >>"$WORK/grow-$shape.rows"
    expect "$db applied" "$(field "$WORK/g-$shape-$n.summary" applied)" "$keys"
    expect "$db ledger rows" "$(sql "$db" -e "SELECT COUNT(*) FROM ledger_entry")" $((n + keys))
    expect "$db balances minus entries" "$(sql "$db" -e "SELECT (SELECT SUM(balance_cents)
      FROM merchant_balance) - (SELECT SUM(amount_cents) FROM ledger_entry)")" 0
    expect "$db replay applied" "$(field "$WORK/r-$shape-$n.summary" applied)" 0
    sql -e "DROP DATABASE $db"
  done
}

# grow_main: --prefill's series for each --key-shape.
grow_main() {
  local shape
  for shape in ${KEY_SHAPE//,/ }; do grow_shape "$shape"; done
  end_state_ok "prefill figures"
  {
    echo
    echo "dedupd bench --prefill $PREFILL: $MESSAGES messages ($((MESSAGES / 2)) new keys) per pass," \
      "$WORKERS workers, batch $BATCH, buffer pool $POOL, $(nproc) cores; ratios to the first N of the same run"
    for shape in ${KEY_SHAPE//,/ }; do
      echo
      echo "$shape-ordered keys (prefill: N seconds rows data_MB index_MB ibd_MB):"
      sed 's/^/  /' "$WORK/grow-$shape.sizes"
      grow_header
      cat "$WORK/grow-$shape.rows"
    done
  } | tee "$WORK/report.txt"
}

# grow_expired DB: the rows of DB's dedup table a purge may delete now.
grow_expired() { sql "$1" -e "SELECT COUNT(*) FROM dedup_record WHERE expire_at < NOW(6) AND status <> 0"; }

# grow_purge_alone DB SECONDS: `dedupd purge` on its own for SECONDS (then
# stopped); prints the rows it deleted a second.
grow_purge_alone() {
  local before pid t0
  before=$(grow_expired "$1")
  t0=$(date +%s.%N)
  "$DEDUPD" purge -c "$WORK/pb.conf" >"$WORK/purge-alone.out" 2>>"$WORK/dedupd.log" &
  pid=$!
  for _ in $(seq "$2"); do kill -0 "$pid" 2>/dev/null && sleep 1; done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
  echo "($before - $(grow_expired "$1")) / ($(date +%s.%N) - $t0)" | bc -l | xargs printf '%.0f\n'
}

# grow_purge_main: --purge-load N: N expired rows (a day of them, expired
# 1 to 8 days ago, time-ordered keys) in the ledger's database, then three
# first passes of new keys, each on its own topic: (A1) purge off, (B) the
# background purge on (purge.interval 1s, so its first pass starts at once;
# purge.batch 1000, the default), (A2) purge off again. B against the mean
# of A1 and A2; the purge's rate during B and alone; the lock waits.
grow_purge_main() {
  local db=grow_purge keys=$((MESSAGES / 2)) n=$PURGE_LOAD before after
  start_mock "pa:$PARTS" "pb:$PARTS" "pc:$PARTS"
  produce pa "$PARTS" "$MESSAGES" 42 "$GROW_FIRST_KEY" seq
  produce pb "$PARTS" "$MESSAGES" 43 $((GROW_FIRST_KEY + 1000000)) seq
  produce pc "$PARTS" "$MESSAGES" 44 $((GROW_FIRST_KEY + 2000000)) seq
  new_db "$db" migrate
  say "prefill: $n expired rows into $db (pool $GROW_LOAD_POOL for the load)"
  grow_prefill "$db" "$n" time $((8 * 86400))
  say "prefill: $n rows in $(xargs printf '%.0f' <"$WORK/prefill.s") s; dedup_record $(grow_size "$db")"
  grow_pass pa "$db" grow-pa pa
  before=$(grow_expired "$db")
  grow_pass pb "$db" grow-pb pb 1s
  after=$(grow_expired "$db")
  grow_pass pc "$db" grow-pc pc
  say "the purge alone for 60 s"
  local alone
  alone=$(grow_purge_alone "$db" 60)
  for r in pa pb pc; do
    expect "$r applied" "$(field "$WORK/$r.summary" applied)" "$keys"
    expect "$r dead letters" "$(field "$WORK/$r.summary" dead_letters)" 0
  done
  expect "ledger rows" "$(sql "$db" -e "SELECT COUNT(*) FROM ledger_entry")" $((n + 3 * keys))
  end_state_ok "purge figures"
  {
    echo
    echo "dedupd bench --purge-load $n: $MESSAGES messages ($keys new keys) per pass, $WORKERS workers," \
      "batch $BATCH, buffer pool $POOL, $(nproc) cores; $n expired rows at the start"
    for r in pa pb pc; do
      printf '  %-34s %8s msg/s  (%s s active; p50 <= %s ms, p99 <= %s ms; row lock waits %s, longest %s ms)\n' \
        "$(case $r in pa) echo "(A1) purge off" ;; pb) echo "(B) background purge on" ;;
          pc) echo "(A2) purge off" ;; esac)" "$(dd_rate "$r")" "$(field "$WORK/$r.summary" active_s)" \
        "$(field "$WORK/$r.summary" latency_p50_le_ms)" "$(field "$WORK/$r.summary" latency_p99_le_ms)" \
        "$(grow_delta "$WORK/$r.st0" "$WORK/$r.st1" Innodb_row_lock_waits)" \
        "$(awk '$1 == "Innodb_row_lock_time_max" { print $2 }' "$WORK/$r.st1")"
    done
    printf '  (B) / mean of (A1), (A2) = %.2f   (goal >= 0.85)\n' \
      "$(echo "2 * $(dd_rate pb) / ($(dd_rate pa) + $(dd_rate pc))" | bc -l)"
    printf '  the purge during (B): %d rows in %.1f s = %.0f rows/s; alone (dedupd purge, 60 s): %s rows/s\n' \
      $((before - after)) "$(field "$WORK/pb.summary" wall_s)" \
      "$(echo "($before - $after) / $(field "$WORK/pb.summary" wall_s)" | bc -l)" "$alone"
    echo "  (Innodb_row_lock_time_max is the server's longest row lock wait since it started)"
  } | tee "$WORK/report.txt"
}

# grow_parts_main: --partitions-load: the same stream on 12 and on 1,000
# partitions of one topic each, a first pass of dedupd (no-op handler) on
# each; msg/s, peak RSS and batches. The mock keeps about 5 MB a partition:
# MESSAGES x ~250 bytes spread over 12 partitions must stay under 60 MB.
grow_parts_main() {
  local p keys=$((MESSAGES / 2))
  start_mock "p12:12" "p1000:1000"
  produce p12 12 "$MESSAGES" 42 0 seq
  produce p1000 1000 "$MESSAGES" 42 0 seq
  for p in 12 1000; do
    new_db "gp$p" migrate
    write_conf "gp$p" "gp$p" "grow-p$p" "p$p" "$WORKERS" "$BATCH" "$BUILD/bench/bench_noop.so"
    run_dedupd "gp$p"
    expect "gp$p applied" "$(field "$WORK/gp$p.summary" applied)" "$keys"
  done
  end_state_ok "partition figures"
  {
    echo
    echo "dedupd bench --partitions-load: $MESSAGES messages, no-op handler, $WORKERS workers, batch $BATCH"
    for p in 12 1000; do
      printf '  %5d partitions: %8s msg/s (%s s active), peak RSS %s MB, %s batches, p99 <= %s ms\n' "$p" \
        "$(dd_rate "gp$p")" "$(field "$WORK/gp$p.summary" active_s)" "$(($(cat "$WORK/gp$p.rss") / 1024))" \
        "$(field "$WORK/gp$p.summary" batches)" "$(field "$WORK/gp$p.summary" latency_p99_le_ms)"
    done
  } | tee "$WORK/report.txt"
}
