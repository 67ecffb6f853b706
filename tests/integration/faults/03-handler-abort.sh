#!/usr/bin/env bash
# 03: a handler that aborts the whole process inside the claim transaction.
# After each restart the transaction is gone (no claim, no effect) and the
# message is applied exactly once.
source "$(dirname "$0")/../lib.sh"
tb_init handler_abort
tb_mock events:2
export TH_MARKER_DIR="$TB_DIR/markers"
mkdir -p "$TH_MARKER_DIR"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 tb_config
tb_migrate || tb_die "migrate failed"

python3 - >"$TB_DIR/stream.txt" <<'PY'
import json
for i in range(600):
    doc = {"id": i, "v": i * 3}
    if i % 97 == 5:
        doc["th"] = "abort_once"
    for copy in range(1 + i % 2):
        print("%d\t-\t%s" % ((i + copy) % 2, json.dumps(doc, sort_keys=bool(copy))))
PY
aborters=$(grep -c abort_once "$TB_DIR/stream.txt" || true)
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

aborts=0
for round in $(seq 1 20); do
  rc=0
  tb_run || rc=$?
  ((rc == 0)) && break
  aborts=$((aborts + 1))
done
tb_eq "run finished after the aborts" 0 "$rc"
tb_check "the handler aborted the process at least 3 times ($aborts)" test "$aborts" -ge 3
tb_check "every abort_once message aborted once ($aborters copies)" \
  test "$(ls "$TH_MARKER_DIR" | wc -l)" -ge 6
tb_eq "one effect row per id" 600 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per id" 600 \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "no dedup row left processing" 0 \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status <> 1')"
tb_assert_committed_at_end
tb_done
