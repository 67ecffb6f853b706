#!/usr/bin/env bash
# 93: the database goes back further than Kafka reaches. One partition;
# 200 payments applied, the database copied cold, then 1,500 large
# payments (8 KB each, applied as they come: the mock cluster keeps about
# 5 MB per partition, so its log start offset moves well past 200). The copy is restored and
# dedupd restarted: the database's position (200) is below the log start
# offset, what it lost from 200 up to there cannot be read again. The run
# says so at error level naming the range, counts it
# (dedupd_position_gaps_total, the summary line), shows it in /readyz's
# text without failing readiness, and applies everything Kafka still has.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init position_gap
tb_private_db

tb_mock payments:1
TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config
tb_migrate || tb_die "migrate failed"

# payments FROM COUNT PAD: COUNT payments from order FROM, PAD bytes of padding each.
payments() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
start, n, pad = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for i in range(start, start + n):
    doc = {"merchant_id": "m%d" % (i % 7), "order_no": "P%08d" % i, "amount": 1.25,
           "txn_id": "T%08d" % i, "currency": "CNY", "status": "PAID",
           "note": "x" * pad}
    print("0\t-\t%s" % json.dumps(doc))
PY
}

payments 0 200 10 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the first run failed"
tb_eq "the first 200 applied" 200 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"

dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
cp -a "$TB_DB2/data" "$TB_DIR/backup"
tb_private_db_restart

# In chunks of 2.4 MB, each applied before the next: nothing is dropped
# before dedupd has read it.
tb_start second
second=$TB_LAST_PID
applied() { (($(tb_sql 'SELECT COUNT(*) FROM ledger_entry') >= $1)); }
for chunk in 0 1 2 3 4; do
  payments $((200 + chunk * 300)) 300 8000 | tb_produce 2>/dev/null || tb_die "produce failed"
  tb_wait_until 60 "chunk $chunk applied" applied $((500 + chunk * 300)) ||
    tb_die "chunk $chunk was not applied"
done
tb_stop "$second" || tb_not_ok "the second run stops cleanly"
tb_eq "all 1,700 applied before the restore" 1700 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
low=$(tb_watermarks | awk '$1 == 0 { print $2 }')
tb_check "the mock cluster dropped the oldest messages (log start $low)" test "$low" -gt 300

dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
rm -rf "$TB_DB2/data"
cp -a "$TB_DIR/backup" "$TB_DB2/data"
tb_private_db_restart

port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
echo "http = { listen = \"127.0.0.1:$port\"; };" >>"$TB_CONF"
tb_start live
live=$TB_LAST_PID
caught_up() { (($(tb_sql 'SELECT COUNT(*) FROM ledger_entry') >= 200 + 1700 - low)); }
tb_wait_until 90 "the run after the restore applied what Kafka has" caught_up ||
  tb_die "the run after the restore did not catch up"
th_wait_status 30 200 /readyz || tb_not_ok "ready after the restore"
ready=$(th_body /readyz)
tb_check "/readyz answers 200 but says what cannot be read again ($ready)" \
  grep -q "^ok: 1 partition(s) assigned, database answers; but the database went back past what Kafka still holds on 1 partition(s) ($((low - 200)) offsets)" <<<"$ready"
th_scrape
tb_eq "dedupd_position_gaps_total" 1 "$(th_metric dedupd_position_gaps_total)"
tb_eq "dedupd_position_gap_offsets_total" "$((low - 200))" "$(th_metric dedupd_position_gap_offsets_total)"
tb_eq "dedupd_position_rewinds_total" 1 "$(th_metric dedupd_position_rewinds_total)"
tb_check "the error line names the range that cannot be read again" \
  grep -q "level=error.*position of group tg, payments \[0\] is 200, below the partition's log start offset $low: Kafka no longer holds offsets 200 to $((low - 1))" "$TB_DIR/live.log"
tb_stop "$live" || tb_not_ok "the run stops cleanly"
tb_eq "what Kafka still had is applied" "$((200 + 1700 - low))" "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_eq "no business key booked twice" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM (SELECT biz_key FROM ledger_entry GROUP BY biz_key HAVING COUNT(*) > 1) d")"
tb_assert_committed_at_end
tb_done
