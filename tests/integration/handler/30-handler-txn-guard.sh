#!/usr/bin/env bash
# 30: a handler that ends dedupd's transaction and opens another (COMMIT;
# BEGIN or ROLLBACK; START TRANSACTION) leaves the in-transaction flag set,
# so only dedupd's own savepoint shows it. dedupd must stop with an error
# naming the handler, roll the batch back, and leave no key recorded as
# applied without its effect, no effect applied twice, and no offset past
# the batch. Each case runs on its own topic and group: the plain message
# by message path, claims first, handle_batch(), savepoints after a REJECT,
# the rollback after a RETRY, and replay --apply.
source "$(dirname "$0")/../lib.sh"
tb_init handler_txn_guard
tb_mock a:1 b:1 c:1 d:1 e:1 f:1
export TB_KEY='${c}:${id}' TB_WORKERS=1 TB_BATCH_MAX=100 TB_BATCH_WAIT_MS=300

# produce CASE SPECIAL...: ids 1..10 on topic CASE; SPECIAL is "ID=ACTION".
produce() {
  local c="$1" i th spec
  shift
  for i in $(seq 1 10); do
    th=
    for spec in "$@"; do [[ "${spec%%=*}" == "$i" ]] && th=",\"th\":\"${spec#*=}\""; done
    printf '0\t-\t{"c":"%s","id":%d%s}\n' "$c" "$i" "$th"
  done | tb_produce "$c" 2>/dev/null || tb_die "produce to $c failed"
}

# expect_guard CASE HANDLER [LOG]: the last run (or LOG) stopped naming the
# handler bug, and the end state of CASE is consistent.
expect_guard() {
  local c="$1" so="$2" log="${3:-}" rc="$4" path="$DD_TEST_HANDLER_DIR/$2.so"
  [[ -n "$log" ]] || log=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
  tb_check "$c: dedupd stops with an error (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
  tb_check "$c: the error names the handler, its file and the bug" \
    grep -qF "handler $so ($path) ended the transaction" <<<"$log"
  tb_check "$c: ... and says it is a handler bug" grep -q "handler bug" <<<"$log"
  tb_eq "$c: no key recorded applied without its effect" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record d LEFT JOIN th_effect e ON e.biz_key = d.biz_key
               WHERE d.status = 1 AND e.biz_key IS NULL AND d.biz_key LIKE '$c:%'")"
  tb_eq "$c: no effect applied twice" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE n > 1 AND biz_key LIKE '$c:%'")"
  tb_eq "$c: the message that broke the transaction is not recorded" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key = '$c:6'")"
}

# run_case CASE HANDLER SPECIAL... (TB_DEDUP_EXTRA may be set)
run_case() {
  local c="$1" so="$2" rc=0 committed
  shift 2
  TB_TOPIC="$c" TB_GROUP="g$c" TB_HANDLER="$DD_TEST_HANDLER_DIR/$so.so" tb_config
  tb_migrate || tb_die "migrate failed"
  produce "$c" "$@"
  tb_run >/dev/null || rc=$?
  expect_guard "$c" "$so" "" "$rc"
  committed=$(tb_committed "g$c" "$c" | awk '{ print $2 }')
  tb_check "$c: the committed offset ($committed) does not pass message 6 (offset 5)" \
    test "$committed" -le 5
}

# a: ROLLBACK; START TRANSACTION in handle(): messages 1-5's effects and
# deferred claims are gone, their outcome rows would be written anyway.
run_case a th_scripted 6=rollback_begin
# b: COMMIT; BEGIN: the handler committed 1-6 itself; dedupd must not go on.
run_case b th_scripted 6=commit_begin
# c: the same with every key claimed before the handler runs.
TB_DEDUP_EXTRA='defer_claim = false;' run_case c th_scripted 6=rollback_begin
# d: handle_batch() does it for the whole batch.
run_case d th_scripted_batch 6=rollback_begin
# e: a REJECT first sends the batch back to run with a savepoint per message.
run_case e th_scripted 2=reject 6=rollback_begin
# f: the handler commits, then a later message asks for a RETRY: dedupd
# rolls back on purpose, and would call the handlers of 1-7 again.
run_case f th_scripted 6=commit_begin 8=retry:1

# replay --apply runs the same lane: the missing keys of a hit the guard too.
rc=0
"$DEDUPD" replay -c "$TB_DIR/dedupd.conf" --topic a --from earliest --apply --all-consumed \
  >"$TB_DIR/replay.log" 2>&1 || rc=$?
TB_TOPIC=a expect_guard a th_scripted "$(cat "$TB_DIR/replay.log")" "$rc"
tb_done
