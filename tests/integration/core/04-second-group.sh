#!/usr/bin/env bash
# 04: a second consumer group replaying the same topic applies nothing new:
# the database, not the group's offsets, knows what was applied, and finds
# every conflict again. The second group reads its claims back with a
# SELECT, as on a server without INSERT ... RETURNING (the first one uses
# RETURNING), and mostly settles keys in the pre-check.
source "$(dirname "$0")/../lib.sh"
tb_init second_group
tb_mock payments:4
TB_GROUP=first tb_config
tb_migrate || tb_die "migrate failed"
tb_gen --keys 500 --dup-min 1 --dup-max 3 --partitions 4 --bad 10 --conflicts 5 --seed 3
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "first group run failed"
before=$(tb_sql 'SELECT COUNT(*), SUM(amount_cents) FROM ledger_entry')
balances=$(tb_sql 'SELECT merchant_id, balance_cents, entries FROM merchant_balance ORDER BY 1')
rows=$(tb_sql 'SELECT COUNT(*), MAX(updated_at) FROM dedup_record WHERE status = 1')

# Small batches: after the first one, every lane pre-checks its keys (most
# are applied), so duplicates and conflicts are judged by the plain read.
TB_GROUP=second TB_BATCH_MAX=50 tb_config
DEDUPD_TEST_FAULTS=no_returning tb_run || tb_die "second group run failed"
tb_check "second group read the claims back by SELECT" \
  grep -q 'acting as if the server had no INSERT ... RETURNING' "$TB_DIR/run.log"
tb_eq "second group applied nothing" 0 "$(tb_summary applied)"
tb_eq "second group: every conflict found again" "$(tb_expect_get dead_letters.conflict)" \
  "$(tb_summary conflicts)"
tb_eq "second group: the rest are duplicates" \
  "$(($(tb_expect_get total_messages) - $(tb_expect_get dead_letters_total)))" \
  "$(tb_summary duplicates)"
tb_eq "ledger unchanged" "$before" "$(tb_sql 'SELECT COUNT(*), SUM(amount_cents) FROM ledger_entry')"
tb_eq "balances unchanged" "$balances" \
  "$(tb_sql 'SELECT merchant_id, balance_cents, entries FROM merchant_balance ORDER BY 1')"
tb_eq "applied dedup rows unchanged" "$rows" "$(tb_sql 'SELECT COUNT(*), MAX(updated_at) FROM dedup_record WHERE status = 1')"
tb_expect_ledger "$TB_DIR/expect.json"
tb_assert_committed_at_end second
tb_assert_committed_at_end first
tb_done
