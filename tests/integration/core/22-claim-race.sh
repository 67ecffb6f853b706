#!/usr/bin/env bash
# 22: the deferred claim loses a race. Two consumer groups, both with the
# default dedup.defer_claim = true, get the same new keys at the same time.
# The first message of the batch makes the handler sleep before its write,
# so both groups pass the pre-check (the keys are absent) and run the
# handler before either commits. The winner inserts the dedup rows and
# commits; the loser's handler write waits for the winner's lock, then its
# insert of the dedup rows fails as a duplicate. It must roll back its
# business writes and replay the batch with the locking claim, which finds
# the winner's rows: duplicates.
# End state: every key applied once (th_effect.n = 1) by one group, one
# applied dedup row per key, the race logged, offsets committed at the end
# by both groups, no dead letters. Then a third group's races, one of them
# followed by a lost COMMIT, are all counted in its summary.
source "$(dirname "$0")/../lib.sh"
tb_init claim_race
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
export TB_BATCH_WAIT_MS=300 TB_KAFKA_PROPS=auto.commit.interval.ms=200
TB_GROUP=g1 tb_config "$TB_DIR/g1.conf"
tb_migrate || tb_die "migrate failed"
TB_GROUP=g2 tb_config "$TB_DIR/g2.conf"

tb_start_groups g1 g2
g1=${TB_PID[g1]} g2=${TB_PID[g2]}
sleep 1

N=50
{
  printf '0\t-\t{"id":0,"th":"sleep:2500"}\n'
  seq 1 $((N - 1)) | awk '{ printf "0\t-\t{\"id\":%d}\n", $1 }'
} | tb_produce 2>/dev/null || tb_die "produce failed"

committed_at() { test "$(tb_committed "$1")" = "0 $N"; }
tb_check "g1 committed at the end" tb_wait_until 30 "g1 offsets" committed_at g1
tb_check "g2 committed at the end" tb_wait_until 30 "g2 offsets" committed_at g2
rc1=0 rc2=0
tb_stop "$g1" || rc1=$?
tb_stop "$g2" || rc2=$?
tb_eq "both workers stop cleanly" "0 0" "$rc1 $rc2"

races() { grep -c 'another consumer claimed a key of this batch' "$TB_DIR/$1.log" || true; }
r1=$(races g1) r2=$(races g2)
tb_check "one group lost the race and replayed its batch (g1 $r1, g2 $r2)" \
  test $((r1 > 0 || r2 > 0)) -eq 1
tb_eq "the summaries count the races as logged" "$((r1 + r2))" \
  "$(tb_summary_sum claim_races "$TB_DIR/g1.log" "$TB_DIR/g2.log")"
tb_eq "the two groups applied each key once between them" "$N" \
  "$(tb_summary_sum applied "$TB_DIR/g1.log" "$TB_DIR/g2.log")"
tb_eq "one effect per key" "$N" "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per key, attempts 1" "$N 1 1" \
  "$(tb_sql 'SELECT COUNT(*), MIN(attempts), MAX(attempts) FROM dedup_record WHERE status = 1' | tr '\t' ' ')"
tb_eq "no other dedup rows" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status <> 1')"
tb_eq "no dead letters" "" "$(tb_dlq_reasons)"

# A race whose locking replay then fails with a retriable error still
# counts. A third group reads the topic again with the pre-check blinded
# (precheck_blind: every key, all applied by now, races) and every second
# COMMIT of its lane reported lost after it went through (commit_lost=2).
# Every batch races; the first commits; the second batch's replay loses its
# COMMIT's outcome, reconnects and runs again, racing once more.
TB_GROUP=g3 tb_config "$TB_DIR/g3.conf"
DEDUPD_TEST_FAULTS=precheck_blind,commit_lost=2 tb_bg g3 "$DEDUPD" run -c "$TB_DIR/g3.conf"
g3=$TB_LAST_PID
tb_check "g3 committed the topic" tb_wait_until 30 "g3 offsets" committed_at g3
seq 1 10 | awk '{ printf "0\t-\t{\"id\":%d}\n", $1 }' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
copies_committed() { test "$(tb_committed g3)" = "0 $((N + 10))"; }
tb_check "g3 committed the copies too" tb_wait_until 30 "g3 offsets" copies_committed
rc3=0
tb_stop "$g3" || rc3=$?
tb_eq "g3 stops cleanly" 0 "$rc3"
r3=$(races g3)
tb_check "a COMMIT's outcome was lost after a race" \
  grep -q 'Lost connection to server during COMMIT (injected' "$TB_DIR/g3.log"
tb_check "g3's batches raced three times or more ($r3)" test "$r3" -ge 3
tb_eq "g3's summary counts every race it logged" "$r3" \
  "$(tb_summary_sum claim_races "$TB_DIR/g3.log")"
tb_eq "g3 applied nothing: every key was a duplicate" 0 \
  "$(tb_summary_sum applied "$TB_DIR/g3.log")"
tb_eq "still one effect per key" "$N 0" "$(tb_sql 'SELECT COUNT(*), SUM(n <> 1) FROM th_effect' | tr '\t' ' ')"
tb_done
