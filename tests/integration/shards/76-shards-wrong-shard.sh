#!/usr/bin/env bash
# 76: three database shards, the ledger sharded by merchant. On a fresh
# layout (no change recorded) the default mysql.shard_check (auto) does not
# check, and says so. After a first run, some keys' rows (dedup row, ledger
# entry, payment order) are moved by SQL from the shard their route names to
# another one, and shard 1's layout is marked changed now: a re-shard whose
# rows were moved wrongly. auto then checks, until the change is dedup.ttl
# old. Their redelivered payments are dead-lettered
# wrong_shard, the error naming both shards, and applied nowhere again
# (every shard's ledger count unchanged); a key whose row is in both shards
# is judged by its own shard's row (a duplicate); new keys are applied in
# their shards; offsets committed at the end. Then, with mysql.shard_check
# = skip, shard 2's MariaDB is killed: new keys of shards
# 0 and 1 are still applied, the skipped check is counted per batch in
# dedupd_shard_check_skipped_total{shard="2"} and warned about once; after
# shard 2's restart everything is committed. With mysql.shard_check = wait
# they wait for shard 2 instead, and are applied after its restart. Last,
# with the layout change older than dedup.ttl, auto stops checking: a
# moved key's redelivery is claimed in its own shard.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init shards_wrong_shard
tb_shards 3
tb_mock payments:4
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_WORKERS=2 TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" \
  "retry = { backoff_initial = \"100ms\"; backoff_max = \"1s\"; };"
tb_migrate || tb_die "migrate failed"

# A merchant of each shard (CRC32(merchant) % 3, dedupd's hash).
declare -A M
for i in $(seq 1 30); do
  k=$(tb_sql "SELECT CRC32('m$i') % 3")
  [[ -n "${M[$k]:-}" ]] || M[$k]=m$i
done
((${#M[@]} == 3)) || tb_die "no merchant for every shard"
tb_log "merchants by shard: 0=${M[0]} 1=${M[1]} 2=${M[2]}"

pay() { printf '%s\t-\t{"merchant_id":"%s","order_no":"%s","amount":1.25,"currency":"CNY","status":"PAID","txn_id":"T%s"}\n' "$1" "$2" "$3" "$3"; }
{
  for k in 0 1 2; do
    for o in 1 2 3 4 5 6; do pay $((o % 4)) "${M[$k]}" "A$o"; done
  done
} | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "first run failed"
tb_eq "first run: 18 applied" 18 "$(tb_summary applied)"
tb_eq "a fresh layout records no change" "NULL NULL NULL" \
  "$(tb_shards_sql "SELECT IFNULL(changed_at, 'NULL') FROM dedupd_shard_layout" | paste -sd' ')"
tb_check "auto: the check is off on a fresh layout" bash -c \
  "tail -n +$TB_RUN_START '$TB_DIR/run.log' | grep -q \"level=info.*Wrong-shard check: off (no shard's layout changed within dedup.ttl\""

# Shard 0's merchant: keys A1-A3 moved to shard 2, A4 copied to shard 1;
# shard 1's merchant: A1 moved to shard 0.
keys() { local m="$1" o out=""; shift; for o in "$@"; do out+="${out:+,}'pay:$m:$o'"; done; echo "$out"; }
copy_rows() { # FROM TO MERCHANT ORDERS...
  local from="$1" to="$2" m="$3" k ord
  shift 3
  k=$(keys "$m" "$@")
  ord=$(printf "'%s'," "$@")
  ord=${ord%,}
  {
    mariadb-dump --no-defaults --socket="${TB_SHARD_SOCKETS[$from]}" -uroot --no-create-info \
      --compact --skip-triggers --hex-blob --where="biz_key IN ($k)" "$TB_DB" dedup_record
    mariadb-dump --no-defaults --socket="${TB_SHARD_SOCKETS[$from]}" -uroot --no-create-info \
      --compact --skip-triggers --hex-blob --where="merchant_id = '$m' AND order_no IN ($ord)" \
      "$TB_DB" payment_order
    tb_shard_sql "$from" "SELECT CONCAT('INSERT INTO ledger_entry (merchant_id, order_no, txn_id,
      amount_cents, currency, biz_key, created_at) VALUES (', QUOTE(merchant_id), ',',
      QUOTE(order_no), ',', QUOTE(txn_id), ',', amount_cents, ',', QUOTE(currency), ',',
      QUOTE(biz_key), ',', QUOTE(created_at), ');') FROM ledger_entry WHERE biz_key IN ($k)"
  } | DD_TEST_MYSQL_SOCKET="${TB_SHARD_SOCKETS[$to]}" _tb_mariadb "$TB_DB" ||
    tb_die "cannot copy rows of $m to shard $to"
}
delete_rows() { # SHARD MERCHANT ORDERS...
  local s="$1" m="$2" k
  shift 2
  k=$(keys "$m" "$@")
  tb_shard_sql "$s" "DELETE FROM dedup_record WHERE biz_key IN ($k);
    DELETE FROM ledger_entry WHERE biz_key IN ($k);
    DELETE FROM payment_order WHERE merchant_id = '${m}' AND order_no IN ($(printf "'%s'," "$@" | sed 's/,$//'))"
}
copy_rows 0 2 "${M[0]}" A1 A2 A3
delete_rows 0 "${M[0]}" A1 A2 A3
copy_rows 0 1 "${M[0]}" A4
copy_rows 1 0 "${M[1]}" A1
delete_rows 1 "${M[1]}" A1
# The re-shard changed shard 1's layout (as `dedupd migrate --relayout`
# records it).
tb_shard_sql 1 "UPDATE dedupd_shard_layout SET changed_at = NOW(6) - INTERVAL 1 HOUR"
ledger() { tb_shards_sql "SELECT COUNT(*) FROM ledger_entry" | paste -sd' '; }
before=$(ledger)
tb_eq "the moved rows are in the wrong shards" "3 1" \
  "$(tb_shard_sql 2 "SELECT COUNT(*) FROM dedup_record WHERE biz_key IN ($(keys "${M[0]}" A1 A2 A3))") $(
    tb_shard_sql 0 "SELECT COUNT(*) FROM ledger_entry WHERE biz_key = 'pay:${M[1]}:A1'")"

# Redelivered: the moved keys (A1 of shard 0's merchant twice), the copied
# one, an untouched one; new keys N1-N2 of each merchant.
{
  pay 0 "${M[0]}" A1
  pay 1 "${M[0]}" A2
  pay 2 "${M[0]}" A3
  pay 3 "${M[0]}" A1
  pay 0 "${M[0]}" A4
  pay 1 "${M[1]}" A1
  pay 2 "${M[2]}" A5
  for k in 0 1 2; do
    for o in 1 2; do pay $(((o + k) % 4)) "${M[$k]}" "N$o"; done
  done
} | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the run after the move failed"
tb_check "auto: the check is on until dedup.ttl after the change" bash -c \
  "tail -n +$TB_RUN_START '$TB_DIR/run.log' | grep -q 'level=info.*Wrong-shard check: on until [0-9-]* [0-9:]* (the layout of shard 1 changed at [0-9-]* [0-9:]*; dedup.ttl 7d)'"
tb_eq "dead letters wrong_shard: the moved keys' messages" 5 "$(tb_dlq_count wrong_shard)"
tb_eq "summary: dlq_wrong_shard" 5 "$(tb_summary dlq_wrong_shard)"
tb_eq "summary: the copied and the untouched key are duplicates" 2 "$(tb_summary duplicates)"
tb_eq "summary: the new keys applied" 6 "$(tb_summary applied)"
tb_dlq >"$TB_DIR/dlq.txt"
tb_check "the dead letter names both shards" grep -q \
  "key pay:${M[0]}:A2 has a row in shard 2 (.*shard2/mysqld.sock) but its route names shard 0 (.*): its rows were not moved when the layout changed; see docs/SHARDS.md, \\\\\?\"Changing the shard count" \
  "$TB_DIR/dlq.txt"
tb_check "the other way round too" grep -q \
  "key pay:${M[1]}:A1 has a row in shard 0 (.*) but its route names shard 1 (.*shard1/mysqld.sock)" \
  "$TB_DIR/dlq.txt"
tb_check "logged at warn" grep -q "level=warn.*has a row in shard 2" "$TB_DIR/run.log"
tb_eq "no dedup row of the moved keys in the shards their routes name" "0 0" \
  "$(tb_shard_sql 0 "SELECT COUNT(*) FROM dedup_record WHERE biz_key IN ($(keys "${M[0]}" A1 A2 A3))") $(
    tb_shard_sql 1 "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'pay:${M[1]}:A1'")"
read -r b0 b1 b2 <<<"$before"
tb_eq "ledger counts: only the new keys added, each in its shard" "$((b0 + 2)) $((b1 + 2)) $((b2 + 2))" "$(ledger)"
for k in 0 1 2; do
  tb_eq "shard $k: its merchant's new keys applied there" 2 \
    "$(tb_shard_sql "$k" "SELECT COUNT(*) FROM dedup_record WHERE biz_key IN ($(keys "${M[$k]}" N1 N2)) AND status = 1")"
done
tb_eq "no business key booked twice" "" \
  "$(tb_shards_sql "SELECT biz_key FROM ledger_entry" | sort | uniq -d | grep -v "pay:${M[0]}:A4" | head -n 5)"
tb_assert_committed_at_end

# Shard 2 down: the check goes on without it (mysql.shard_check = skip).
DEDUPD_MYSQL_SHARD_CHECK=skip tb_start bg
pid=$TB_LAST_PID
tb_wait_until 30 "assigned" grep -q "Assigned $TB_TOPIC " "$TB_DIR/bg.log" || tb_die "no partitions"
tb_shard_kill9 2
tb_log "shard 2 killed"
{
  for k in 0 1; do
    for o in $(seq 1 10); do pay $((o % 4)) "${M[$k]}" "D$o"; done
  done
} | tb_produce 2>/dev/null || tb_die "produce failed"
applied01() {
  (($(tb_shard_sql 0 "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'pay:${M[0]}:D%' AND status = 1") +
    $(tb_shard_sql 1 "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'pay:${M[1]}:D%' AND status = 1") == 20))
}
tb_check "shards 0 and 1 apply their new keys while shard 2 is down" \
  tb_wait_until 60 "20 keys applied in shards 0 and 1" applied01
skipped() { th_scrape && (($(th_metric 'dedupd_shard_check_skipped_total{shard="2"}') > 0)); }
tb_check "dedupd_shard_check_skipped_total{shard=\"2\"} counts" tb_wait_until 30 "skips counted" skipped
tb_eq "nothing skipped for shards 0 and 1" "0 0" \
  "$(th_metric 'dedupd_shard_check_skipped_total{shard="0"}') $(th_metric 'dedupd_shard_check_skipped_total{shard="1"}')"
tb_eq "one warning for the outage" 1 \
  "$(grep -c 'The wrong-shard check cannot ask shard 2 .*going on without it' "$TB_DIR/bg.log")"
tb_shard_restart 2
tb_log "shard 2 restarted"
{
  pay 1 "${M[2]}" R1
  pay 2 "${M[0]}" R1
} | tb_produce 2>/dev/null || tb_die "produce failed"
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
tb_wait_until 120 "everything committed after the restart" at_end || tb_die "not everything was committed"
tb_eq "the new keys after the restart applied in shards 2 and 0" "1 1" \
  "$(tb_shard_sql 2 "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'pay:${M[2]}:R1' AND status = 1") $(
    tb_shard_sql 0 "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'pay:${M[0]}:R1' AND status = 1")"
tb_check "the check reaches shard 2 again" grep -q "The wrong-shard check reaches shard 2 .* again" \
  "$TB_DIR/bg.log"
tb_stop "$pid" || tb_not_ok "dedupd run exited non-zero after SIGTERM"

# mysql.shard_check = wait: with shard 2 down, the other shards' new keys
# wait for it, and are applied once it is back.
DEDUPD_MYSQL_SHARD_CHECK=wait tb_start bgw
pid=$TB_LAST_PID
tb_wait_until 30 "assigned" grep -q "Assigned $TB_TOPIC " "$TB_DIR/bgw.log" || tb_die "no partitions"
tb_shard_kill9 2
tb_log "shard 2 killed again"
{
  for k in 0 1; do
    for o in 1 2 3; do pay $((o % 4)) "${M[$k]}" "W$o"; done
  done
} | tb_produce 2>/dev/null || tb_die "produce failed"
waiting() { grep -q "The wrong-shard check cannot ask shard 2 .*new keys wait until it answers" "$TB_DIR/bgw.log"; }
tb_check "wait: the check says the keys wait" tb_wait_until 30 "the warning" waiting
sleep 2
wapplied() { tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'pay:%:W%'" | awk '{ s += $1 } END { print s + 0 }'; }
tb_eq "wait: nothing of shards 0 and 1 claimed while shard 2 is down" 0 "$(wapplied)"
tb_shard_restart 2
tb_log "shard 2 restarted"
tb_wait_until 120 "everything committed after the restart" at_end || tb_die "not everything was committed"
tb_eq "wait: applied after the restart" 6 "$(wapplied)"
tb_stop "$pid" || tb_not_ok "dedupd run exited non-zero after SIGTERM"
tb_eq "no business key booked twice, at the end" "" \
  "$(tb_shards_sql "SELECT biz_key FROM ledger_entry" | sort | uniq -d | grep -v "pay:${M[0]}:A4" | head -n 5)"
tb_assert_committed_at_end

# The layout change older than dedup.ttl (7d): auto checks no more, as a
# row of the old layout would have been purged by now. A moved key's
# redelivery is then claimed in its own shard (here, where its row was not
# purged, applied a second time: what the check guarded against).
tb_shard_sql 1 "UPDATE dedupd_shard_layout SET changed_at = NOW(6) - INTERVAL 8 DAY"
pay 3 "${M[1]}" A1 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the run after dedup.ttl failed"
tb_check "auto: the check is off once the change is older than dedup.ttl" bash -c \
  "tail -n +$TB_RUN_START '$TB_DIR/run.log' | grep -q \"Wrong-shard check: off (no shard's layout changed within dedup.ttl\""
tb_eq "auto, off: no dead letter wrong_shard for the moved key" 0 "$(tb_summary dlq_wrong_shard)"
tb_eq "auto, off: the moved key claimed in its own shard" 1 \
  "$(tb_shard_sql 1 "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'pay:${M[1]}:A1' AND status = 1")"
tb_assert_committed_at_end
tb_done
