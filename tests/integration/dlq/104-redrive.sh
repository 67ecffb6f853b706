#!/usr/bin/env bash
# 104: `dedupd redrive` brings dead letters back once their cause is fixed.
# A missing grant dead-letters ten messages retries_exhausted (their rows
# failed); a reject, a conflict and bad JSON are dead-lettered too, and one
# dead letter is produced by hand for a key without a row. --dry-run
# changes nothing and commits nothing; the filters pick letters;
# dedup.retry_failed = false leaves failed keys alone, --retry-failed runs
# them (exit 4: the reject is rejected again); a conflict stays a conflict,
# a key since applied is a duplicate, nothing is applied twice and nothing
# is dead-lettered again; the letters the dead-letter producer wrote pass
# redrive's checks; a filtered redrive leaves its group at the first letter
# it left out, the plain one after it reads from there, and the group's
# progress makes the next one read nothing.
source "$(dirname "$0")/../lib.sh"
tb_init redrive
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
export TB_DEDUP_EXTRA='retry_failed = false;'
tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "100ms"; max_attempts = 2; };'
tb_migrate || tb_die "migrate failed"
DLQ=events.dlq

printf '0\t-\t%s\n' '{"id":"ok0"}' '{"id":"rj","th":"reject"}' '{"id":"c1","v":1}' \
  '{"id":"c1","v":2}' '{bad' | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "first run failed"
# the grant goes missing: every message asks for a retry until it is dead-lettered
tb_sql "REVOKE INSERT ON \`$TB_DB\`.th_effect FROM '$TB_RT_USER'@'%'"
for i in $(seq 0 9); do printf '0\t-\t{"id":"g%d"}\n' "$i"; done |
  tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "second run failed"
tb_eq "ten letters retries_exhausted" 10 "$(tb_dlq_count retries_exhausted "$DLQ")"
tb_eq "their rows are failed" 10 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'ev:g%' AND status = 2")"
# a dead letter of a message whose claim was never recorded (no row)
printf '0\t-\t%s\n' '{"id":"s0"}' |
  "$DDTK" produce -b "$TB_BROKERS" -t "$DLQ" -H dedupd.reason=retries_exhausted \
    -H dedupd.topic=events -H dedupd.partition=0 -H dedupd.offset=99 -H dedupd.biz_key=ev:s0 \
    2>/dev/null || tb_die "produce of the hand-made dead letter failed"
tb_sql "GRANT INSERT ON \`$TB_DB\`.th_effect TO '$TB_RT_USER'@'%'"
letters_before=$(tb_dlq_reasons "$DLQ")
rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
state() { tb_sql "SELECT biz_key, n FROM th_effect ORDER BY 1; SELECT biz_key, status, HEX(request_hash) FROM dedup_record ORDER BY 1"; }
redrive() {
  local name="$1"
  shift
  "$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --report "$TB_DIR/$name.json" "$@" \
    2>"$TB_DIR/$name.log"
}

before=$(state)
redrive dry --dry-run || tb_die "redrive --dry-run failed (see dry.log)"
r="$TB_DIR/dry.json"
# 14 letters: s0 to apply, the g keys and rj left (retry_failed = false), c1
# a conflict, one bad, none refused (dedupd wrote them)
tb_eq "dry run: what became of each letter" "14 1 11 1 1 0 dry_run" \
  "$(rj "$r" '" ".join(str(r["summary"][k]) for k in ("letters", "to_apply", "left", "conflict", "bad", "refused", "mode"))')"
tb_eq "dry run changes nothing" "$before" "$(state)"
tb_eq "dry run commits nothing" "" "$(tb_committed tg.redrive "$DLQ" | awk '$2 >= 0')"

redrive keys --dry-run --key 'ev:g[0-4]' || tb_die "redrive --key failed"
tb_eq "--key: five letters, the rest filtered" "5 9" \
  "$(rj "$TB_DIR/keys.json" 'str(r["summary"]["letters"] - r["summary"]["filtered"]) + " " + str(r["summary"]["filtered"])')"
redrive offs --dry-run --source-offsets 0-3 --reason conflict,rejected || tb_die "redrive --source-offsets failed"
tb_eq "--source-offsets and --reason: rj and c1" "ev:c1 conflict hash_differs
ev:rj left rejected" "$(rj "$TB_DIR/offs.json" '"\n".join(sorted(e["key"] + " " + e["outcome"] + " " + e["reason"] for e in r["entries"] if e["outcome"] != "filtered"))')"
redrive future --dry-run --since 2999-01-01T00:00:00Z || tb_die "redrive --since failed"
tb_eq "--since the future: everything filtered" "14 14" \
  "$(rj "$TB_DIR/future.json" 'str(r["summary"]["letters"]) + " " + str(r["summary"]["filtered"])')"

# retry_failed = false: the failed g keys are left, s0 (no row) applied.
redrive one --reason retries_exhausted || tb_die "redrive failed (see one.log)"
r="$TB_DIR/one.json"
tb_eq "redrive: s0 applied" 1 "$(rj "$r" 'r["summary"]["applied"]')"
tb_eq "redrive: the failed keys are left (retry_failed = false)" \
  "0 0" "$(tb_sql "SELECT COUNT(*), COALESCE(SUM(status = 1), 0) FROM th_effect e JOIN dedup_record d USING (biz_key) WHERE biz_key LIKE 'ev:g%'" | tr '\t' ' ')"
tb_eq "s0 applied once" "ev:s0 1" "$(tb_sql "SELECT biz_key, n FROM th_effect WHERE biz_key = 'ev:s0'" | tr '\t' ' ')"
# each partition's commit: its first letter left out by --reason, else its end
held=$(rj "$r" '"\n".join("%d %d" % (g["partition"], min([e["offset"] for e in r["entries"] if e["partition"] == g["partition"] and e["outcome"] == "filtered"] or [g["read_to"]])) for g in r["ranges"])')
tb_eq "--reason: the group stays at the first letter left out" "$held" \
  "$(tb_committed tg.redrive "$DLQ")"
tb_check "some letters were left out ($held)" grep -q filtered "$r"

redrive again || tb_die "second redrive failed"
tb_eq "the plain redrive after it reads every letter from there" \
  "$(rj "$r" 'sum(g["read_to"] for g in r["ranges"])')" \
  "$(rj "$TB_DIR/again.json" 'r["summary"]["letters"] + sum(g["from"] for g in r["ranges"])')"
tb_assert_committed_at_end tg.redrive "$DLQ"
redrive again2 || tb_die "third redrive failed"
tb_eq "the group's progress: the next redrive reads nothing" 0 \
  "$(rj "$TB_DIR/again2.json" 'r["summary"]["letters"]')"

# --retry-failed from the start: the g keys are applied, s0 is a duplicate,
# rj rejected again, c1 stays a conflict, the bad letter stays bad.
c1_before=$(tb_sql "SELECT HEX(request_hash), status FROM dedup_record WHERE biz_key = 'ev:c1'")
rc=0
redrive all --from earliest --retry-failed || rc=$?
tb_eq "--retry-failed exits 4: rj was rejected again" 4 "$rc"
r="$TB_DIR/all.json"
tb_eq "--retry-failed: ten g keys applied, rj tried and failed again" "10 1" \
  "$(rj "$r" 'str(r["summary"]["applied"]) + " " + str(r["summary"]["apply_failed"])')"
tb_eq "--retry-failed: s0 applied already (a duplicate), the only key applied before" "1 0" \
  "$(rj "$r" 'str(r["summary"]["duplicate"]) + " " + str(r["summary"]["to_apply"])')"
tb_eq "every effect once, rj none" "ev:c1 1
ev:g0 1
ev:g1 1
ev:g2 1
ev:g3 1
ev:g4 1
ev:g5 1
ev:g6 1
ev:g7 1
ev:g8 1
ev:g9 1
ev:ok0 1
ev:s0 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY 1' | tr '\t' ' ')"
tb_eq "the conflict's row is unchanged" "$c1_before" \
  "$(tb_sql "SELECT HEX(request_hash), status FROM dedup_record WHERE biz_key = 'ev:c1'")"
tb_eq "g rows applied" 10 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'ev:g%' AND status = 1")"
tb_eq "redrive dead-letters nothing" "$letters_before" "$(tb_dlq_reasons "$DLQ")"
tb_eq "the live group is untouched" "0 15" "$(tb_committed tg events)"

tb_not_ok_unless_usage() {
  local rc=0
  "$DEDUPD" redrive -c "$TB_CONF" "$@" >/dev/null 2>&1 || rc=$?
  tb_eq "usage error: $*" 2 "$rc"
}
tb_not_ok_unless_usage
tb_not_ok_unless_usage --from-dlq "$DLQ" --reason nonsense
tb_not_ok_unless_usage --from-dlq "$DLQ" --rate 0
tb_done
