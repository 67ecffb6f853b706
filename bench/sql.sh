# shellcheck shell=bash
# scripts/bench --sql: the SQL handler against the C ledger example. Sourced
# by scripts/bench after its MariaDB, build, cluster and stream are up;
# uses its helpers (sql, new_db, write_conf, run_dedupd, field, dd_rate,
# median, rates, us_per_msg, cpu_line, expect, end_state_ok, say, rounds) and its variables (WORK,
# DEDUPD, MESSAGES, PARTS, WORKERS, BATCH, LANE_KEY, REPEAT).
#
# The same stream through the same dedupd, first pass, twice per round:
#   (a) with the ledger example (examples/ledger, C: handle_batch writing
#       a batch with one statement per table, balances summed per merchant
#       first, bulk executions with RETURNING for the entries' ids);
#   (s) with the SQL handler doing the ledger's writes on the ledger's
#       tables: the entry, the balance upsert and the order upsert, each a
#       statement of the configuration below, run in bulk for a batch.
# (s) writes what (a) writes but the response snapshot (the C ledger's
# entry id and order status, which the SQL handler would read back with a
# response query): the writes are what is compared.

# The ledger's tables (examples/ledger/ledger.c, ledger_migrate) and its
# three writes, amounts in cents as the ledger keeps them.
sql_ledger_group() {
  cat <<'EOF'
handler = { sql = {
  migrate = (
    "CREATE TABLE IF NOT EXISTS ledger_entry ( id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
    " merchant_id VARCHAR(64) NOT NULL, order_no VARCHAR(64) NOT NULL,"
    " txn_id VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL, currency CHAR(3) NOT NULL,"
    " biz_key VARBINARY(255) NOT NULL,"
    " created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY idx_merchant (merchant_id)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE IF NOT EXISTS merchant_balance ( merchant_id VARCHAR(64) NOT NULL,"
    " currency CHAR(3) NOT NULL, balance_cents BIGINT NOT NULL, entries BIGINT NOT NULL,"
    " PRIMARY KEY (merchant_id, currency)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE IF NOT EXISTS payment_order ( merchant_id VARCHAR(64) NOT NULL,"
    " order_no VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL, txn_id VARCHAR(64) NULL,"
    " amount_cents BIGINT NULL, updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
    " ON UPDATE CURRENT_TIMESTAMP(6), PRIMARY KEY (merchant_id, order_no))"
    " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin");
  statements = (
    { name = "entry";
      sql = "INSERT INTO ledger_entry (merchant_id, order_no, txn_id, amount_cents, currency, biz_key)"
            " VALUES (${merchant_id}, ${order_no}, ${txn_id}, ${amount} * 100, ${currency}, ${@key})"; },
    { name = "balance";
      sql = "INSERT INTO merchant_balance (merchant_id, currency, balance_cents, entries)"
            " VALUES (${merchant_id}, ${currency}, ${amount} * 100, 1)"
            " ON DUPLICATE KEY UPDATE balance_cents = balance_cents + VALUES(balance_cents),"
            " entries = entries + VALUES(entries)"; },
    { name = "order";
      sql = "INSERT INTO payment_order (merchant_id, order_no, status, txn_id, amount_cents)"
            " VALUES (${merchant_id}, ${order_no}, ${status}, ${txn_id}, ${amount} * 100)"
            " ON DUPLICATE KEY UPDATE"
            " txn_id = IF(status = 'UNPAID', VALUES(txn_id), txn_id),"
            " amount_cents = IF(status = 'UNPAID', VALUES(amount_cents), amount_cents),"
            " status = IF(status = 'UNPAID', VALUES(status), status)"; });
}; };
EOF
}

# sql_conf NAME DB GROUP: write_conf's configuration with the SQL handler.
sql_conf() {
  write_conf "$1" "$2" "$3" bench "$WORKERS" "$BATCH"
  grep -v '^handler = ' "$WORK/$1.conf" >"$WORK/$1.tmp"
  sql_ledger_group >>"$WORK/$1.tmp"
  mv "$WORK/$1.tmp" "$WORK/$1.conf"
}

sql_main() {
  local i n keys c_runs=() s_runs=() C S
  say "(a) dedupd first pass with the C ledger and (s) with the SQL handler doing its writes:" \
    "$(rounds "$REPEAT") of one each"
  for i in $(seq "$REPEAT"); do
    new_db "cled$i" migrate
    write_conf "cled$i" "cled$i" "bench-cled-$i" bench "$WORKERS" "$BATCH"
    run_dedupd "cled$i"
    c_runs+=("cled$i")
    sql -e "DROP DATABASE IF EXISTS sqll$i; CREATE DATABASE sqll$i"
    sql_conf "sqll$i" "sqll$i" "bench-sqll-$i"
    "$DEDUPD" migrate -c "$WORK/sqll$i.conf" >/dev/null 2>>"$WORK/dedupd.log"
    run_dedupd "sqll$i"
    s_runs+=("sqll$i")
    say "round $i: C ledger $(dd_rate "cled$i"), SQL handler $(dd_rate "sqll$i") msg/s"
  done
  C=$(median dd_rate "${c_runs[@]}")
  S=$(median dd_rate "${s_runs[@]}")
  keys=$((MESSAGES / 2))
  for n in "${c_runs[@]}" "${s_runs[@]}"; do
    expect "$n applied" "$(field "$WORK/$n.summary" applied)" "$keys"
    expect "$n dead letters" "$(field "$WORK/$n.summary" dead_letters)" 0
    expect "$n ledger rows" "$(sql "$n" -e "SELECT COUNT(*) FROM ledger_entry")" "$keys"
    expect "$n balances minus entries" "$(sql "$n" -e "SELECT (SELECT SUM(balance_cents)
      FROM merchant_balance) - (SELECT SUM(amount_cents) FROM ledger_entry)")" 0
    expect "$n orders paid" "$(sql "$n" -e "SELECT COUNT(*) FROM payment_order
      WHERE status = 'PAID'")" "$keys"
  done
  for i in $(seq "$REPEAT"); do
    expect "round $i: the same balances" \
      "$(sql "sqll$i" -e "SELECT merchant_id, currency, balance_cents, entries FROM merchant_balance
        ORDER BY 1, 2" | md5sum)" \
      "$(sql "cled$i" -e "SELECT merchant_id, currency, balance_cents, entries FROM merchant_balance
        ORDER BY 1, 2" | md5sum)"
  done
  end_state_ok "SQL handler figures"
  {
    echo
    echo "dedupd bench, SQL handler: $(field "$WORK/$C.summary" messages) messages, $PARTS partitions," \
      "$WORKERS workers, lane_key '${LANE_KEY:-none}', batch $BATCH, $(nproc) core$( (($(nproc) == 1)) || echo s)"
    for n in "$C" "$S"; do
      label="(a) C ledger (examples/ledger)"
      [[ $n == "$S" ]] && label="(s) SQL handler, the ledger's writes"
      printf '  %-40s %9s msg/s  (%s s active; p50 <= %s ms, p99 <= %s ms)\n' "$label" \
        "$(dd_rate "$n")" "$(field "$WORK/$n.summary" active_s)" \
        "$(field "$WORK/$n.summary" latency_p50_le_ms)" "$(field "$WORK/$n.summary" latency_p99_le_ms)"
    done
    if ((REPEAT > 1)); then
      echo "  medians of $REPEAT rounds, in msg/s: (a)$(rates dd_rate "${c_runs[@]}");" \
        "(s)$(rates dd_rate "${s_runs[@]}")"
    fi
    printf '  SQL / C = %.2f   (goal >= 0.90; round by round:' \
      "$(echo "$(dd_rate "$S") / $(dd_rate "$C")" | bc -l)"
    for i in $(seq "$REPEAT"); do
      printf ' %.2f' "$(echo "$(dd_rate "sqll$i") / $(dd_rate "cled$i")" | bc -l)"
    done
    echo ")"
    # CPU per message (dedupd's and its MariaDB's) bounds the rate on a
    # machine whose cores are busy, and other processes do not move it as
    # they move a round's wall time: the steadier figure on a shared machine.
    sql_us() { us_per_msg "$1" "$(field "$WORK/$1.summary" messages)"; }
    CC=$(median sql_us "${c_runs[@]}")
    SC=$(median sql_us "${s_runs[@]}")
    printf '  CPU per message (dedupd + MariaDB, median round): C %.1f us, SQL %.1f us; C / SQL = %.2f   (round by round:' \
      "$(sql_us "$CC")" "$(sql_us "$SC")" "$(echo "$(sql_us "$CC") / $(sql_us "$SC")" | bc -l)"
    for i in $(seq "$REPEAT"); do
      printf ' %.2f' "$(echo "$(sql_us "cled$i") / $(sql_us "sqll$i")" | bc -l)"
    done
    echo ")"
    cpu_line "(a) C ledger" "$CC" "$(field "$WORK/$CC.summary" messages)" "$(field "$WORK/$CC.summary" active_s)"
    cpu_line "(s) SQL handler" "$SC" "$(field "$WORK/$SC.summary" messages)" "$(field "$WORK/$SC.summary" active_s)"
  } | tee "$WORK/report.txt"
}
