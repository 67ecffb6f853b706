#!/usr/bin/env bash
# 15: lock contention. Two consumer groups race over the same keys at the
# same time, while another session holds a dedup row lock past
# innodb_lock_wait_timeout (1205) and closes a lock cycle with a claim in
# flight (1213 deadlock; the other session is the heavier transaction, so
# InnoDB rolls back the worker's). Every error is retried; each key is
# applied once in total.
#
# g1 claims every key first (dedup.defer_claim = false): its claim locks the
# seeded rows the other session holds. g2 keeps the default: it settles the
# seeded keys by its pre-check (applied rows are read without a lock) and
# inserts new keys' rows last, racing g1 for them.
#
# On a private MariaDB: the test lowers innodb_lock_wait_timeout globally.
source "$(dirname "$0")/../lib.sh"
tb_init lock_contention
tb_private_db
_tb_mariadb -e 'SET GLOBAL innodb_lock_wait_timeout = 2' || tb_die "cannot set the lock wait timeout"
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
export TB_KAFKA_PROPS=auto.commit.interval.ms=200
conf() { TB_GROUP=$1 tb_config "$TB_DIR/$1.conf" 'retry = { backoff_initial = "50ms"; backoff_max = "300ms"; };'; }
# g1's batches wait up to 1 s, so that its first batch holds ev:0 and ev:5
# together however slowly the messages arrive (a slow build).
TB_BATCH_WAIT_MS=1000 TB_DEDUP_EXTRA='defer_claim = false;' conf g1
tb_migrate || tb_die "migrate failed"
conf g2

# Seed ev:0..ev:9 with group g1: the rows the other session will lock.
seq 0 9 | awk '{ printf "0\t-\t{\"id\":%d}\n", $1 }' | tb_produce 2>/dev/null || tb_die "produce failed"
TB_CONF="$TB_DIR/g1.conf" TB_GROUP=g1 tb_run || tb_die "seed run failed"

# Both groups up and idle (g2 re-reads the seed: duplicates).
tb_start_groups g1 g2
g1=${TB_PID[g1]} g2=${TB_PID[g2]}
sleep 1

# The other session: heavy (5,000 undo records), locks ev:5, waits until a
# worker blocks on it while holding ev:0.. (claims go in key order; the
# wait is seen in INNODB_TRX, for at most 30 s), then asks for ev:0: a lock
# cycle. It keeps its locks for 5 s, past the 2 s lock wait timeout of the
# workers.
tb_sql 'CREATE TABLE scratch (n INT PRIMARY KEY) ENGINE=InnoDB'
tb_bg holder _tb_mariadb -N -B --unbuffered "$TB_DB" -e "
  SET SESSION innodb_lock_wait_timeout = 30;
  BEGIN;
  INSERT INTO scratch SELECT seq FROM seq_1_to_5000;
  SELECT biz_key FROM dedup_record WHERE biz_key = 'ev:5' FOR UPDATE;
  SELECT 'holding ev:5';
  DELIMITER //
  BEGIN NOT ATOMIC
    DECLARE i INT DEFAULT 0;
    WHILE i < 600 AND (SELECT COUNT(*) FROM information_schema.INNODB_TRX
                       WHERE trx_state = 'LOCK WAIT') = 0 DO
      DO SLEEP(0.05); SET i = i + 1;
    END WHILE;
  END //
  DELIMITER ;
  SELECT biz_key FROM dedup_record WHERE biz_key = 'ev:0' FOR UPDATE;
  SELECT 'holding ev:0';
  DO SLEEP(5);
  ROLLBACK;"
holder=$TB_LAST_PID
tb_wait_until 10 "holder locks ev:5" grep -q 'holding ev:5' "$TB_DIR/holder.log" ||
  tb_die "the holder session did not get its lock"
N=2000
seq 0 $((N - 1)) | awk '{ printf "0\t-\t{\"id\":%d}\n", $1 }' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
wait "$holder" || true
tb_check "the holder session was not the deadlock victim" grep -q 'holding ev:0' "$TB_DIR/holder.log"

effects_done() { test "$(tb_sql 'SELECT COUNT(*) FROM th_effect')" = "$N"; }
tb_check "every key applied" tb_wait_until 60 "$N effects" effects_done
committed_at() { test "$(tb_committed "$1")" = "0 $2"; }
tb_check "g1 committed at the end" tb_wait_until 20 "g1 offsets" committed_at g1 $((N + 10))
tb_check "g2 committed at the end" tb_wait_until 20 "g2 offsets" committed_at g2 $((N + 10))
rc1=0 rc2=0
tb_stop "$g1" || rc1=$?
tb_stop "$g2" || rc2=$?
tb_eq "both workers stop cleanly" "0 0" "$rc1 $rc2"

logs="$TB_DIR/g1.log $TB_DIR/g2.log"
# shellcheck disable=SC2086
{
  tb_check "a lock wait timeout (1205) was retried" grep -q '1205' $logs
  tb_check "a deadlock (1213) was retried" grep -q '1213' $logs
  applied=$(tb_summary_sum applied $logs)
}
tb_eq "the two groups applied each new key once between them" $((N - 10)) "$applied"
tb_eq "one effect per key" "$N" "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per key" "$N" "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "no other dedup rows" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status <> 1')"
tb_assert_committed_at_end g1
tb_assert_committed_at_end g2
tb_done
