#!/usr/bin/env bash
# 27: the key format is recorded on the dedup table, and only a dedupd that
# renders that format uses the table. `dedupd migrate` records it (table
# comment "dedupd key_format=2"). A table without the record (written before
# formats were recorded) or with another format is refused by run, replay
# and purge with a message saying what to do, before anything is consumed;
# migrate records the format on a table without one (warning when it holds
# rows) but never changes a recorded format.
source "$(dirname "$0")/../lib.sh"
tb_init key_format
tb_mock events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' tb_config
tb_migrate || tb_die "migrate failed"

comment() {
  tb_sql "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dedup_record'"
}
tb_eq "migrate records the key format" "dedupd key_format=2" "$(comment)"
tb_check "migrate says which format" grep -q "key format 2" "$TB_DIR/migrate.log"

printf '0\t-\t{"id":"a"}\n' | tb_produce 2>/dev/null || tb_die "produce failed"

# expect_refusal WHAT PATTERN CMD...: CMD exits non-zero with PATTERN in its output.
expect_refusal() {
  local what="$1" pattern="$2" rc=0 out="$TB_DIR/refusal.log"
  shift 2
  timeout --foreground "$(tb_secs 60)" "$@" >"$out" 2>&1 || rc=$?
  if ((rc == 0 || rc == 124)); then
    tb_not_ok "$what: exit $rc, expected a refusal"
  elif ! grep -qE "$pattern" "$out"; then
    tb_not_ok "$what: /$pattern/ not in: $(head -c 600 "$out")"
  else
    tb_ok "$what: exit $rc"
  fi
  cat "$out" >>"$TB_DIR/all-refusals.log"
}

# A table from before formats were recorded.
tb_sql "ALTER TABLE dedup_record COMMENT = ''"
tb_sql "INSERT INTO dedup_record (biz_key, request_hash, status, topic, kpartition, koffset,
          expire_at) VALUES ('ev:old', UNHEX(SHA2('{}', 256)), 1, 'events', 0, 99,
          NOW(6) + INTERVAL 1 DAY)"
none='records no key format: .*run `dedupd migrate` to record format 2'
expect_refusal "run refuses a table without a key format" "$none" \
  "$DEDUPD" run -c "$TB_CONF" --exit-at-end
expect_refusal "replay refuses it" "$none" "$DEDUPD" replay -c "$TB_CONF" --from earliest
expect_refusal "purge refuses it" "$none" "$DEDUPD" purge -c "$TB_CONF"
expect_refusal "check fails on it" "FAIL key format: .*records no key format" \
  "$DEDUPD" check -c "$TB_CONF"
tb_eq "nothing applied" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "nothing committed" "0 -1" "$(tb_committed)"

tb_migrate || tb_die "migrate on the old table failed"
tb_eq "migrate records the format on it" "dedupd key_format=2" "$(comment)"
tb_check "migrate warns that older keys may differ" \
  grep -q "holds rows written before formats were recorded" "$TB_DIR/migrate.log"
tb_eq "its rows are kept" 1 "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'ev:old'")"
tb_run || tb_die "run after migrate failed"
tb_eq "then the message is applied" "ev:a 1" \
  "$(tb_sql 'SELECT biz_key, n FROM th_effect' | tr '\t' ' ')"
tb_assert_committed_at_end

# A table of another (future) format: refused, and migrate does not relabel it.
tb_sql "ALTER TABLE dedup_record COMMENT = 'dedupd key_format=3'"
printf '0\t-\t{"id":"b"}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
other='holds keys of format 3, this dedupd renders format 2'
expect_refusal "run refuses a table of format 3" "$other" "$DEDUPD" run -c "$TB_CONF" --exit-at-end
expect_refusal "migrate refuses to change a recorded format" "$other" \
  env DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_CONF"
tb_eq "the recorded format stays" "dedupd key_format=3" "$(comment)"
tb_eq "b not applied" 0 "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:b'")"

# No table at all: run says to migrate first.
tb_sql "DROP TABLE dedup_record"
expect_refusal "run without a dedup table" 'dedup table dedup_record does not exist.*dedupd migrate' \
  "$DEDUPD" run -c "$TB_CONF" --exit-at-end
tb_done
