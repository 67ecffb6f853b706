#!/usr/bin/env bash
# 53: `replay --apply` while a live consumer runs on the same topic. Rows of
# 150 keys are deleted; then redeliveries of those keys and new messages are
# produced while `dedupd run` and `dedupd replay --apply` both work on them.
# The claim decides who applies each key: every key's effect must exist
# exactly once (th_effect.n = 1), and replay's repaired + already_applied
# must account for every key it found missing; keys whose messages the live
# group had not committed yet are pending, never missing. Once everything is
# applied and committed, replay --fail-on-findings exits 0.
source "$(dirname "$0")/../lib.sh"
tb_init replay_live
tb_mock payments:2
# Small batches so both sides claim a few keys at a time and the races are real.
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_WORKERS=2 TB_BATCH_MAX=16 tb_config
tb_migrate || tb_die "migrate failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
gen() { # FIRST LAST: key o<i> on partition i % 2; 8 ms in the handler
  local i
  for ((i = $1; i <= $2; i++)); do
    printf '%d\t-\t{"merchant_id":"m1","order_no":"o%d","th":"sleep:8"}\n' $((i % 2)) "$i"
  done
}
gen 1 300 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_eq "first run applied 300 keys once" "300 300" "$(tb_sql 'SELECT COUNT(*), SUM(n) FROM th_effect' | tr '\t' ' ')"

tb_sql "CREATE TABLE victims AS SELECT biz_key FROM dedup_record WHERE CAST(SUBSTRING_INDEX(biz_key, ':o', -1) AS UNSIGNED) % 2 = 0;
        DELETE FROM th_effect WHERE biz_key IN (SELECT biz_key FROM victims);
        DELETE FROM dedup_record WHERE biz_key IN (SELECT biz_key FROM victims)"
tb_eq "150 keys deleted" 150 "$(tb_sql 'SELECT COUNT(*) FROM victims')"

tb_start live
live=$TB_LAST_PID
tb_wait_until 60 "live consumer assigned" grep -q "Assigned payments \[1\]" "$TB_DIR/live.log" ||
  tb_die "live consumer got no assignment"
# Redeliveries of the deleted keys (same payloads) and 100 new keys, produced
# while both run.
{ for ((i = 2; i <= 300; i += 2)); do gen "$i" "$i"; done; gen 301 400; } >"$TB_DIR/more.txt"
# (a background command's stdin is /dev/null unless redirected inside it)
tb_bg produce bash -c 'exec "$1" produce -b "$2" -t payments <"$3"' _ "$DDTK" "$TB_BROKERS" "$TB_DIR/more.txt"
producer=$TB_LAST_PID
"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --report "$TB_DIR/apply.json" \
  2>"$TB_DIR/replay.log" || tb_die "replay --apply failed (see replay.log)"
wait "$producer" || tb_die "producing the new messages failed"
# A function, so that every try counts again (an argument "$(...)" would be
# counted once, before the first try).
applied_is() { test "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')" = "$1"; }
tb_wait_until 90 "live consumer applies everything" applied_is 400 ||
  tb_not_ok "live consumer did not reach 400 applied keys"
tb_wait_until 60 "live consumer commits the end" bash -c \
  "diff <(\"$DDTK\" committed -b $TB_BROKERS -g tg -t payments) <(\"$DDTK\" watermarks -b $TB_BROKERS -t payments | awk '{print \$1, \$3}')" ||
  tb_not_ok "live consumer did not commit the end"
tb_stop "$live" || tb_not_ok "live consumer exited non-zero"

r="$TB_DIR/apply.json"
tb_eq "every key's effect exactly once" "400 400 0" \
  "$(tb_sql 'SELECT COUNT(*), SUM(n), SUM(n <> 1) FROM th_effect' | tr '\t' ' ')"
tb_eq "one applied dedup row per key" "400 400" \
  "$(tb_sql 'SELECT COUNT(*), SUM(status = 1) FROM dedup_record' | tr '\t' ' ')"
missing=$(rj "$r" 'r["summary"]["missing"]')
tb_check "replay found the deleted keys missing ($missing)" test "$missing" -ge 1
tb_eq "repaired + already applied = missing, none failed" "$missing 0" \
  "$(rj "$r" '"%d %d" % (r["summary"]["repaired"] + r["summary"]["already_applied"], r["summary"]["apply_failed"])')"
tb_log "replay repaired $(rj "$r" 'r["summary"]["repaired"]'), the live consumer got $(rj "$r" 'r["summary"]["already_applied"]') first, $(rj "$r" 'r["summary"]["pending"]') pending"
tb_eq "pending entries are past the group's committed offset at the replay's start" 0 \
  "$(rj "$r" 'sum(1 for e in r["entries"] if e["status"] == "pending" and e["offset"] < next(g["group_committed"] or 0 for g in r["ranges"] if g["partition"] == e["partition"]))')"
tb_assert_committed_at_end
rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --fail-on-findings --report "$TB_DIR/final.json" \
  2>>"$TB_DIR/replay.log" || rc=$?
tb_eq "everything applied and committed: --fail-on-findings exits 0" 0 "$rc"
tb_eq "... with no finding and nothing pending" "0 0 400" \
  "$(rj "$TB_DIR/final.json" '"%d %d %d" % (r["summary"]["findings"], r["summary"]["pending"], r["summary"]["applied"])')"
tb_done
