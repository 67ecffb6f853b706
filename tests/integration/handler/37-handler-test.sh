#!/usr/bin/env bash
# 37: `dedupd handler-test` tells a handler that applies each message
# exactly once from one that does not. On the shared server
# (--mysql-socket), all at once:
#  - the three examples (minimal, coupon, ledger: handle, the state machine
#    with per-connection statements, handle_batch) pass;
#  - th_v3 with envelopes (Kafka key and headers) passes once the columns
#    that differ by design (its connections' ids, which path applied a
#    message) are ignored, and fails without --ignore-column;
#  - th_own_conn (writes on its own connection) and th_memory (keeps totals
#    in memory) fail, exit 1, with the rows that differ;
#  - usage errors exit 2.
# End state: the exit codes, the verdicts and FAIL lines in the output, and
# no database of handler-test's left on the server.
source "$(dirname "$0")/../lib.sh"
tb_init handler_test
SRC=$DD_TEST_SRC_DIR
HANDLERS=$(dirname "$DD_LEDGER_SO")

# ht NAME ARGS...: handler-test in the background, output in NAME.out;
# ht_wait collects the exit codes (rc_of NAME).
declare -A HT_PID HT_RC
ht() {
  local name="$1"
  shift
  "$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" "$@" >"$TB_DIR/$name.out" \
    2>"$TB_DIR/$name.log" &
  HT_PID[$name]=$!
}
ht_wait() {
  local name rc
  for name in "${!HT_PID[@]}"; do
    rc=0
    wait "${HT_PID[$name]}" || rc=$?
    HT_RC[$name]=$rc
  done
}
rc_of() { echo "${HT_RC[$1]}"; }

for ex in minimal coupon ledger; do
  ht "$ex" -c "$SRC/examples/$ex/dedupd.conf" --handler "$HANDLERS/$ex.so" \
    "$SRC/examples/$ex/messages.jsonl"
done
cat >"$TB_DIR/v3.jsonl" <<'JSON'
{"payload": {"c": "h", "id": 1}, "key": "k1", "headers": {"trace-id": "tr-9", "tenant": "acme"}}
{"payload": "{\"c\":\"h\",\"id\":2,\"single\":true}", "headers": {"trace-id": "tr-9", "x": null}}
{"payload": {"c": "h", "id": 3}, "headers": {"trace-id": "tr-9", "tenant": "acme"}}
JSON
ht v3 --envelope --handler "$DD_TEST_HANDLER_DIR/th_v3.so" --key '${c}:${id}' \
  --ignore-column th_v3_conn.conn_id --ignore-column th_v3_effect.path "$TB_DIR/v3.jsonl"
ht v3_strict --envelope --handler "$DD_TEST_HANDLER_DIR/th_v3.so" --key '${c}:${id}' --seed 7 \
  "$TB_DIR/v3.jsonl"
printf '{"id":"a","account":"x","n":5}\n{"id":"b","account":"x","n":7}\n{"id":"c","account":"y","n":1}\n' \
  >"$TB_DIR/accounts.jsonl"
ht own_conn --handler "$DD_TEST_HANDLER_DIR/th_own_conn.so" --key 'acc:${account}:${id}' \
  "$TB_DIR/accounts.jsonl"
ht memory --handler "$DD_TEST_HANDLER_DIR/th_memory.so" --key 'acc:${account}:${id}' \
  --lane-key '${account}' "$TB_DIR/accounts.jsonl"
ht_wait

for ex in minimal coupon ledger; do
  tb_eq "$ex example: exit 0" 0 "$(rc_of "$ex")"
  tb_check "$ex example: PASS" grep -q '^handler-test: PASS$' "$TB_DIR/$ex.out"
done
tb_check "minimal: both passes delivered every message (5, then 10)" \
  grep -q 'pass 2: each message twice.*: 10 delivered, 3 applied' "$TB_DIR/minimal.out"
tb_check "minimal: prints the handler's table, less its AUTO_INCREMENT id" \
  grep -q "^ok   table signup (ignoring id): the same 3 row(s)" "$TB_DIR/minimal.out"
tb_check "coupon: the one-way state machine refused the second redemption" \
  grep -qP '^\s+C1\tu1\t500\tREDEEMED\to1$' "$TB_DIR/coupon.out"
tb_check "ledger: its three tables compared" \
  test "$(grep -c '^ok   table ' "$TB_DIR/ledger.out")" -eq 3
tb_eq "th_v3 with envelopes, ignoring the columns that differ by design: exit 0" 0 "$(rc_of v3)"
tb_check "th_v3: every message's trace-id header reached the handler" \
  test "$(grep -cP '^\s+h:[123]\t1\ttr-9\t' "$TB_DIR/v3.out")" -eq 3
tb_eq "th_v3 without --ignore-column: exit 1" 1 "$(rc_of v3_strict)"
tb_check "th_v3 without --ignore-column: its connections' ids differ" \
  grep -q '^FAIL table th_v3_conn' "$TB_DIR/v3_strict.out"
for bad in own_conn memory; do
  tb_eq "th_$bad: exit 1" 1 "$(rc_of "$bad")"
  tb_check "th_$bad: verdict FAIL" grep -q '^handler-test: FAIL' "$TB_DIR/$bad.out"
done
own_conn_diff() {
  grep -A2 '^FAIL table th_own_effect (ignoring id): 3 row(s) after pass 1' "$TB_DIR/own_conn.out" |
    grep -q 'only after pass 2'
}
tb_check "th_own_conn: its writes, repeated with each replay, show after pass 2 only" own_conn_diff
tb_check "th_memory: the totals differ" \
  grep -q '^FAIL table th_memory_total: 2 row(s) after pass 1, 2 after pass 2' "$TB_DIR/memory.out"
tb_check "th_memory: pass 1's totals are right" grep -qP '^\s+x\t12$' "$TB_DIR/memory.out"

rc=0
"$DEDUPD" handler-test --handler x.so >/dev/null 2>&1 || rc=$?
tb_eq "no MESSAGES: usage error" 2 "$rc"
rc=0
"$DEDUPD" handler-test --handler x.so --key k --seed x m.jsonl >/dev/null 2>&1 || rc=$?
tb_eq "a bad --seed: usage error" 2 "$rc"
rc=0
"$DEDUPD" handler-test --envelope --handler x.so --key k "$TB_DIR/accounts.jsonl" >/dev/null \
  2>"$TB_DIR/usage.log" || rc=$?
tb_eq "a file that is not envelopes: usage error" 2 "$rc"
tb_check "... naming the line" grep -q 'accounts.jsonl:1: ' "$TB_DIR/usage.log"
# The dedup table's line counts the keys by status (the ledger example:
# its rejected payments are failed keys).
ledger_counts=$(sed -n 's/^ok   dedup table dedup_record (business keys: \([0-9]* applied, [0-9]* failed\)): the same \([0-9]*\) row(s).*/\1 of \2/p' "$TB_DIR/ledger.out")
tb_log "ledger: $ledger_counts"
tb_check "the dedup table's line counts the keys by status" \
  python3 -c 'import re,sys; a, f, n = map(int, re.match(r"(\d+) applied, (\d+) failed of (\d+)$", sys.argv[1]).groups()); sys.exit(not (a + f == n and f > 0))' "$ledger_counts"
cp "$SRC/examples/coupon/dedupd.conf" "$TB_DIR/bad-lane.conf"
sed -i 's/lane_key = "${code}"/lane_key = "${order_no}"/' "$TB_DIR/bad-lane.conf"
lane_line=$(grep -n 'lane_key = ' "$TB_DIR/bad-lane.conf" | cut -d: -f1)
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" -c "$TB_DIR/bad-lane.conf" \
  --handler "$HANDLERS/coupon.so" "$SRC/examples/coupon/messages.jsonl" >/dev/null \
  2>"$TB_DIR/bad-lane.log" || rc=$?
tb_eq "a lane key field not in the key: handler-test fails" 1 "$rc"
tb_check "... naming the user's file and line, not a generated one" \
  grep -q "handler-test: $TB_DIR/bad-lane.conf:$lane_line: .*lane_key.*is not a field of" "$TB_DIR/bad-lane.log"
tb_check "... and no pass's file" bash -c "! grep -q 'pass1.conf' '$TB_DIR/bad-lane.log'"
no_sanitizer_reports() { ! grep -lE 'runtime error|Sanitizer' "$TB_DIR"/*.log; }
tb_check "no sanitizer report in any run (ASan/UBSan builds)" no_sanitizer_reports
pids=$(IFS=,; echo "${HT_PID[*]}")
tb_eq "handler-test dropped its databases" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM information_schema.SCHEMATA
             WHERE SUBSTRING_INDEX(SUBSTRING_INDEX(SCHEMA_NAME, '_', 3), '_', -1) IN ($pids)
             AND SCHEMA_NAME LIKE 'dedupd\\_htest\\_%'")"
tb_done
