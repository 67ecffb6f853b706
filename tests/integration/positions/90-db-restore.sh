#!/usr/bin/env bash
# 90: the database goes back in time. 3,000 unique payments over 4
# partitions: the first 1,500 are applied, the database server is stopped
# and its data directory copied (a cold backup), the other 1,500 are
# applied; then the server is stopped, the copy put back (a restore from
# that backup) and dedupd restarted as an operator would, with Kafka's
# committed offsets at the end of every partition. The database's own
# positions (dedupd_position) are those of the copy, behind Kafka's: the
# restart reads the 1,500 lost payments again, logs the warn line naming
# the group, the partitions and both offsets, counts the metric, and ends
# with every payment once. Last, an upgrade in place from before the table.
# Next to it, a group in external mode (the notify example, its store of
# sends on another server, which the restore does not touch): the
# notices it sent after the copy lose their dedup rows in the restore;
# read again, each is claimed anew and reconcile() asked first, which finds
# the send done: recorded applied without sending again.
source "$(dirname "$0")/../lib.sh"
tb_init db_restore
SHARED_SOCK=$DD_TEST_MYSQL_SOCKET
tb_private_db

tb_mock payments:4 notices:2
MAIN_CONF=$TB_CONF
TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_GROUP=gx TB_TOPIC=notices \
  TB_DEDUP_EXTRA='table = "notice_record";' \
  TB_HANDLER_CONFIG="socket = \"$SHARED_SOCK\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";" \
  tb_config "$TB_DIR/x.conf" 'external = { lease = "2s"; scan_interval = "0"; };'
tb_migrate || tb_die "migrate (external) failed"
TB_CONF=$MAIN_CONF
TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config
tb_migrate || tb_die "migrate failed"
# The notification store, on the shared server.
store() { DD_TEST_MYSQL_SOCKET=$SHARED_SOCK tb_sql "$1"; }
store "CREATE TABLE notify_outbox (biz_key VARBINARY(255) NOT NULL, fence BIGINT NOT NULL,
         recipient VARCHAR(255) NULL, body TEXT NULL,
         sent_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY (biz_key, fence));
       CREATE TABLE notify_fence (biz_key VARBINARY(255) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL);
       GRANT SELECT, INSERT, UPDATE ON \`$TB_DB\`.notify_outbox TO '$TB_RT_USER'@'%';
       GRANT SELECT, INSERT, UPDATE ON \`$TB_DB\`.notify_fence TO '$TB_RT_USER'@'%';" ||
  tb_die "cannot create the notification store"
notices() {
  seq "$1" "$2" | awk '{ printf "%d\t-\t{\"id\":\"x%d\",\"to\":\"u%d\",\"text\":\"hello\"}\n", $1 % 2, $1, $1 }' |
    tb_produce notices 2>/dev/null || tb_die "produce failed"
}
run_x() { TB_CONF=$TB_DIR/x.conf tb_run || tb_die "the external run failed"; }

tb_gen --keys 3000 --dup-min 1 --dup-max 1 --partitions 4 --seed 90
head -n 1500 "$TB_DIR/stream.txt" >"$TB_DIR/first.txt"
tail -n +1501 "$TB_DIR/stream.txt" >"$TB_DIR/second.txt"

tb_produce <"$TB_DIR/first.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the first run failed"
notices 1 20
run_x
tb_eq "the first half applied" 1500 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
first_committed=$(tb_committed) || tb_die "cannot read committed offsets"
tb_eq "the database records the group's positions where Kafka's are" "$first_committed" \
  "$(tb_sql "SELECT kpartition, next_offset FROM dedupd_position WHERE group_id = 'tg'
             AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"

# The cold backup.
dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
cp -a "$TB_DB2/data" "$TB_DIR/backup"
tb_private_db_restart

tb_produce <"$TB_DIR/second.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the second run failed"
notices 21 40
run_x
tb_eq "40 notices sent before the restore" 40 "$(store 'SELECT COUNT(*) FROM notify_outbox')"
tb_eq "all 3,000 applied before the restore" 3000 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_assert_committed_at_end

# The restore.
dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
rm -rf "$TB_DB2/data"
cp -a "$TB_DIR/backup" "$TB_DB2/data"
tb_private_db_restart
tb_eq "the restored database lost the second half" 1500 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.txt" 2>&1 || tb_not_ok "dedupd stats after the restore"
for p in 0 1 2 3; do
  db=$(awk -v p="$p" '$1 == p { print $2 }' <<<"$first_committed")
  k=$(tb_committed | awk -v p="$p" '$1 == p { print $2 }')
  tb_check "dedupd stats shows both positions of partition $p and the difference" \
    grep -Eq "^  payments \[$p\] +$db, $((k - db)) behind Kafka's committed offset: the database went back$" "$TB_DIR/stats.txt"
done

tb_run || tb_die "the run after the restore failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_eq "the lost half read again and applied" 1500 "$(tb_summary applied)"
tb_eq "nothing else applied again" 1500 "$(tb_summary messages)"
tb_eq "a rewind counted per partition" 4 "$(tb_summary position_rewinds)"
tb_eq "no gap" 0 "$(tb_summary position_gaps)"
log=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
for p in 0 1 2 3; do
  db=$(awk -v p="$p" '$1 == p { print $2 }' <<<"$first_committed")
  k=$(tb_committed | awk -v p="$p" '$1 == p { print $2 }')
  tb_check "the warn line names group, partition $p and both offsets ($db, $k)" \
    grep -q "level=warn.*position of group tg, payments \[$p\] is $db, behind Kafka's committed offset $k: the database went back in time (restored from a backup, or failed over" <<<"$log"
done
tb_eq "the database's positions at the end again" "$(tb_committed)" \
  "$(tb_sql "SELECT kpartition, next_offset FROM dedupd_position WHERE group_id = 'tg'
             AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"

# External mode: the 20 notices the restore lost are read again.
tb_eq "the restore lost the dedup rows of the notices sent after the copy" 20 \
  "$(tb_sql "SELECT COUNT(*) FROM notice_record")"
run_x
tb_eq "every notice recorded applied once" "40 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM notice_record" | tr '\t' ' ')"
tb_eq "every notification sent once, by one token" "40 40" \
  "$(store "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_outbox" | tr '\t' ' ')"
tb_eq "the lost ones were found sent by reconcile(), not sent again" 20 \
  "$(tb_sql "SELECT COUNT(*) FROM notice_record WHERE JSON_VALUE(response, '\$.reconciled') = 1")"
tb_check "the log says why reconcile() was asked" \
  grep -q 'Claimed anew a key read again after the database went back in time' "$TB_DIR/run.log"
tb_assert_committed_at_end gx notices

# A plain restart now reads nothing again.
tb_run || tb_die "the last run failed"
tb_eq "a restart after that reads nothing again" 0 "$(tb_summary messages)"
tb_eq "and counts no rewind" 0 "$(tb_summary position_rewinds)"

# An upgrade in place: a database from before the table (dropped here)
# runs on Kafka's offsets and says so; once `dedupd migrate` created the
# table, the first run finds no position, starts at Kafka's committed
# offsets (nothing read again) and records them.
tb_sql 'DROP TABLE dedupd_position'
tb_run || tb_die "the run without the table failed"
tb_eq "without the table nothing is read again" 0 "$(tb_summary messages)"
tb_check "and it warns that positions are not kept" \
  grep -q "level=warn msg=\"The database has no table dedupd_position" "$TB_DIR/run.log"
tb_migrate || tb_die "migrate after the upgrade failed"
tb_run || tb_die "the run after the upgrade failed"
tb_eq "after the upgrade nothing is read again" 0 "$(tb_summary messages)"
tb_eq "the positions are recorded from Kafka's" "$(tb_committed)" \
  "$(tb_sql "SELECT kpartition, next_offset FROM dedupd_position WHERE group_id = 'tg'
             AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"
tb_done
