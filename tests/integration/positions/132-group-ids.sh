#!/usr/bin/env bash
# 132: any group id Kafka allows has positions of its own. The table of the
# first layout (keyed by group_id VARCHAR(255), no check message), holding
# a position that records no check: `dedupd run` refuses it, naming
# `dedupd migrate`; migrate upgrades it in place, keeping the row. With
# Kafka holding no committed offset to vouch for that position, the run
# does not skip by it: it reads the partition from its start, says why,
# and writes the position anew with its check. Then a group id of 300
# bytes (longer than the first layout's column) runs to the end
# (--exit-at-end ends, its offsets committed, its row holding the whole
# id), and group "tg " (a trailing space: a group of its own in Kafka,
# and one row with "tg" under the first layout's PAD SPACE collation)
# reads the partition from its start instead of from tg's position.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/positions.sh"
pos_bed group_ids
tb_sql "DROP TABLE dedupd_position;
  CREATE TABLE dedupd_position (group_id VARCHAR(255) NOT NULL, topic VARCHAR(249) NOT NULL,
    kpartition INT NOT NULL, next_offset BIGINT NOT NULL,
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (group_id, topic, kpartition)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
  INSERT INTO dedupd_position (group_id, topic, kpartition, next_offset) VALUES ('tg', 'payments', 0, 3);
  GRANT SELECT, INSERT, UPDATE ON \`$TB_DB\`.dedupd_position TO '$TB_RT_USER'@'%';" ||
  tb_die "cannot create the table of the first layout"
pos_payments p 0 5 | tb_produce 2>/dev/null || tb_die "produce failed"

if tb_run >/dev/null; then tb_not_ok "run refuses the table of the first layout"; else
  tb_ok "run refuses the table of the first layout"; fi
tb_check "and says to run dedupd migrate" grep -q "level=error msg=\"Stopping: the table dedupd_position was created by an older dedupd (it has no column group_key or check_digest): run \`dedupd migrate\` with this configuration to upgrade it" "$TB_DIR/run.log"
tb_eq "nothing applied" 0 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_migrate || tb_die "migrate (the upgrade) failed"
tb_check "migrate says it upgraded the table" grep -q "Upgrading the table dedupd_position" \
  "$TB_DIR/migrate.log"
tb_eq "the row is kept, keyed by its group's digest" "3 none 1" \
  "$(tb_sql "SELECT next_offset, IFNULL(check_offset, 'none'), group_key = UNHEX(SHA2('tg', 256))
             FROM dedupd_position" | tr '\t' ' ')"

tb_run || tb_die "the run after the upgrade failed"
tb_eq "a position without a check, and no committed offset: all 5 read" 5 "$(tb_summary applied)"
tb_eq "counted as a position not used" 1 "$(tb_summary position_mismatches)"
tb_check "the warn line says why" grep -q "level=warn msg=\"The database's position of group tg, payments \[0\] is 3, it records no message to check it by (written by an older dedupd), and Kafka has no committed offset for the group there to vouch for it: so it is not used to skip anything. Starting at the log start offset 0" "$TB_DIR/run.log"
tb_check "the position is written anew with its check" grep -Eq '^5 [0-4]$' <<<"$(pos_row)"
tb_assert_committed_at_end

long=$(printf 'g%.0s' $(seq 300))
TB_GROUP=$long tb_config
tb_run || tb_not_ok "a group id of 300 bytes runs to the end"
tb_eq "it reads the partition as a group of its own (duplicates)" "5 5" \
  "$(tb_summary messages) $(tb_summary duplicates)"
tb_eq "its position holds the whole id" "300 5" \
  "$(tb_sql "SELECT LENGTH(group_id), next_offset FROM dedupd_position WHERE group_id = '$long'" | tr '\t' ' ')"
tb_eq "no position write failed" 0 "$(tb_summary position_errors)"
tb_assert_committed_at_end "$long"

TB_GROUP='tg ' tb_config
tb_run || tb_die "the run of group 'tg ' failed"
tb_eq "group 'tg ' reads the partition from its start, not from tg's position" "5 5" \
  "$(tb_summary messages) $(tb_summary duplicates)"
tb_eq "each group has its row" "3 1" \
  "$(tb_sql "SELECT COUNT(*), SUM(group_id = BINARY 'tg ') FROM dedupd_position" | tr '\t' ' ')"
tb_assert_committed_at_end 'tg '
tb_eq "every payment applied once" "5 5" \
  "$(tb_sql 'SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM ledger_entry' | tr '\t' ' ')"
tb_done
