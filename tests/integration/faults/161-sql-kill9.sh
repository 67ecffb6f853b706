#!/usr/bin/env bash
# 161: the SQL handler booking a stream of payment callbacks (duplicates,
# conflicting copies, bad messages) while the worker is killed with SIGKILL
# at random moments and restarted until it finishes: every payment booked
# exactly once, with decimal amounts summed exactly into the balances
# (DECIMAL parameters, no double anywhere), the negative amounts rejected
# by the table's CHECK, every bad message dead-lettered.
source "$(dirname "$0")/../lib.sh"
tb_init sql_kill9
tb_mock payments:4
cat >"$TB_DIR/grants.sql" <<'EOF'
GRANT INSERT ON `x`.`entry` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `x`.`balance` TO 'dedupd'@'%';
EOF
export TB_HANDLER_GRANTS="$TB_DIR/grants.sql"
TB_HANDLER_SQL='
  migrate = (
    "CREATE TABLE IF NOT EXISTS entry (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " merchant_id VARCHAR(64) NOT NULL, order_no VARCHAR(64) NOT NULL, txn_id VARCHAR(64) NOT NULL,"
    " amount DECIMAL(38,2) NOT NULL CHECK (amount > 0), biz_key VARBINARY(255) NOT NULL)",
    "CREATE TABLE IF NOT EXISTS balance (merchant_id VARCHAR(64) PRIMARY KEY,"
    " balance DECIMAL(38,2) NOT NULL, entries BIGINT NOT NULL)"
  );
  statements = (
    { name = "entry"; sql = "INSERT INTO entry (merchant_id, order_no, txn_id, amount, biz_key)"
      " VALUES (${merchant_id}, ${order_no}, ${txn_id}, ${amount}, ${@key})"; },
    { name = "balance"; sql = "INSERT INTO balance VALUES (${merchant_id}, ${amount}, 1)"
      " ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), entries = entries + 1"; }
  );' TB_WORKERS=4 TB_BATCH_MAX=10 TB_KAFKA_PROPS=auto.commit.interval.ms=200 \
  TB_DEDUP_EXTRA='lane_key = "${merchant_id}";' tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 1500 --dup-min 1 --dup-max 4 --partitions 4 --bad 20 --conflicts 10 --seed 161
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

RANDOM=161
kills=0
applied() { tb_sql 'SELECT COUNT(*) FROM dedup_record'; }
# Three kills, each once 40-200 more keys are recorded: every restart
# waits for the killed member's session to end before the group moves on.
for round in $(seq 1 3); do
  target=$(($(applied) + 40 + RANDOM % 160))
  tb_bg "run$round" "$DEDUPD" run -c "$TB_CONF" --exit-at-end
  pid=$TB_LAST_PID
  while kill -0 "$pid" 2>/dev/null && (($(applied) < target)); do sleep 0.05; done
  sleep "0.0$((RANDOM % 10))"
  if kill -0 "$pid" 2>/dev/null; then
    tb_kill9 "$pid"
    kills=$((kills + 1))
    tb_log "round $round: killed at $(applied) dedup rows (target $target)"
  else
    wait "$pid" 2>/dev/null && break
  fi
done
tb_check "worker was killed at least twice ($kills)" test "$kills" -ge 2
tb_run || tb_die "final run failed"

want=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
for m in sorted(e["merchants"]):
    c = e["merchants"][m]["balance_cents"]
    print("%s\t%s%d.%02d\t%d" % (m, "-" if c < 0 else "", abs(c) // 100, abs(c) % 100, e["merchants"][m]["entries"]))' \
  "$TB_DIR/expect.json")
tb_eq "each merchant's balance, exact to the cent, and its entries" "$want" \
  "$(tb_sql 'SELECT merchant_id, balance, entries FROM balance ORDER BY merchant_id')"
tb_eq "one entry per payment" "$(tb_expect_get unique_keys_applied)" \
  "$(tb_sql 'SELECT COUNT(*) FROM entry')"
tb_eq "no business key booked twice" 0 \
  "$(tb_sql 'SELECT COUNT(*) FROM (SELECT biz_key FROM entry GROUP BY biz_key HAVING COUNT(*) > 1) d')"
tb_eq "the entries add up to the balances" 0.00 \
  "$(tb_sql 'SELECT (SELECT SUM(amount) FROM entry) - (SELECT SUM(balance) FROM balance)')"
tb_eq "dedup rows applied" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "dedup rows failed (the negative amounts)" "$(tb_expect_get dedup_rows.failed)" \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 2 AND error LIKE 'statement entry: CONSTRAINT%'")"
tb_eq "dedup rows processing" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 0')"
for reason in bad_json key_missing key_too_long conflict rejected; do
  tb_eq "distinct dead letters $reason" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_distinct "$reason")"
done
tb_assert_committed_at_end
tb_done
