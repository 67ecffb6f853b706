#!/usr/bin/env bash
# 45: log.format = "json" at log.level = "debug": every line dedupd writes is
# one JSON object with ts, level and msg (per-message lines also topic,
# partition, offset), librdkafka's own logs come through the same writer in
# every command (run, check, replay, stats, purge: no raw "%7|...|" line),
# and no secret appears anywhere: not the database password (from
# password_env), not a librdkafka sasl.password, not in a failed login.
# check looks topics up without creating them: a misspelled one fails it
# and does not appear in the cluster.
source "$(dirname "$0")/../lib.sh"
tb_init logs_json
tb_mock payments:2
pw='Pw-0b5cure-7Q'
kpw='Kafka-S3cret-9'
_tb_mariadb -e "ALTER USER '$TB_MIG_USER'@'%' IDENTIFIED BY '$pw';
                ALTER USER '$TB_RT_USER'@'%' IDENTIFIED BY '$pw'" ||
  tb_die "cannot give the database users a password"
TB_KAFKA_PROPS="sasl.password=$kpw debug=conf,cgrp" \
  TB_MYSQL_EXTRA='password_env = "DEDUPD_MYSQL_PASSWORD";' tb_config "$TB_CONF" \
  'log = { level = "debug"; format = "json"; };'
export DEDUPD_MYSQL_PASSWORD="$pw"
tb_migrate || tb_die "migrate failed"
tb_gen --keys 30 --dup-min 1 --dup-max 2 --partitions 2 --bad 8 --conflicts 2 --seed 45
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>"$TB_DIR/check.log" ||
  tb_not_ok "check failed: $(tail -n 3 "$TB_DIR/check.out")"
# The other commands under the same configuration: their stderr is the log.
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/replay.json" 2>"$TB_DIR/replay.log" ||
  tb_not_ok "replay failed: $(tail -n 3 "$TB_DIR/replay.log")"
"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.log" ||
  tb_not_ok "stats failed: $(tail -n 3 "$TB_DIR/stats.log")"
"$DEDUPD" purge -c "$TB_CONF" --dry-run >"$TB_DIR/purge.out" 2>"$TB_DIR/purge.log" ||
  tb_not_ok "purge --dry-run failed: $(tail -n 3 "$TB_DIR/purge.log")"
# A misspelled topic: check fails, and the topic is not created.
TB_TOPICS="payments paymnets" TB_KAFKA_PROPS="debug=conf" \
  TB_MYSQL_EXTRA='password_env = "DEDUPD_MYSQL_PASSWORD";' tb_config "$TB_DIR/typo.conf" \
  'log = { level = "debug"; format = "json"; };'
rc=0
"$DEDUPD" check -c "$TB_DIR/typo.conf" >"$TB_DIR/typo.out" 2>"$TB_DIR/typo.log" || rc=$?
TB_CONF="$TB_DIR/dedupd.conf"
tb_eq "check with a misspelled topic fails" 1 "$rc"
tb_check "... naming it, and only it" grep -qx 'FAIL kafka: topic paymnets does not exist at .*' "$TB_DIR/typo.out"
tb_eq "... every other check passes" "" "$(grep '^FAIL' "$TB_DIR/typo.out" | grep -v paymnets)"
tb_check "... and the topic was not created" bash -c '! "$1" partitions -b "$2" -t paymnets' _ \
  "$DDTK" "$TB_BROKERS"
rc=0
DEDUPD_MYSQL_PASSWORD="wrong-$pw" "$DEDUPD" run -c "$TB_CONF" --exit-at-end >"$TB_DIR/badpw.log" 2>&1 || rc=$?
tb_eq "wrong password: startup fails" 1 "$rc"
tb_check "wrong password: says access denied" grep -q "Access denied" "$TB_DIR/badpw.log"

tb_check "every line is a JSON object with ts, level, msg" python3 -c '
import json, sys
n = per_msg = 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("summary ") or line.startswith("---- dedupd run"):
        continue  # stdout lines, not logs
    d = json.loads(line)
    assert isinstance(d, dict) and {"ts", "level", "msg"} <= d.keys(), line
    assert d["level"] in ("error", "warn", "info", "debug"), line
    if "offset" in d:
        assert isinstance(d["partition"], int) and isinstance(d["offset"], int), line
        per_msg += 1
    n += 1
assert n > 50 and per_msg >= 8, (n, per_msg)' "$TB_DIR/run.log"
tb_check "librdkafka logs are bridged" grep -q '"msg":"librdkafka consumer' "$TB_DIR/run.log"
for f in check.log typo.log replay.log stats.log purge.log; do
  tb_check "$f: every line is a JSON log object" python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("dedupd replay (") or line.startswith("  "):
        continue  # the summary table replay prints on stderr
    d = json.loads(line)
    assert {"ts", "level", "msg"} <= d.keys(), line
    n += 1
assert n > 0 or sys.argv[1].endswith("purge.log"), "no log line"' "$TB_DIR/$f"
done
tb_check "check and replay bridge librdkafka (debug=conf,cgrp)" \
  grep -q '"msg":"librdkafka consumer' "$TB_DIR/check.log" "$TB_DIR/replay.log"
tb_check "no raw librdkafka line (%N|...|) anywhere" \
  bash -c '! grep -E "^%[0-7]\|" "$@"' _ "$TB_DIR"/*.log
tb_check "a conflict is logged at warn with both hashes" python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("{"):
        d = json.loads(line)
        if d.get("reason") == "conflict":
            assert d["level"] == "warn" and len(d["hash"]) == 64 and len(d["stored_hash"]) == 64, d
            n += 1
assert n >= 1, n' "$TB_DIR/run.log"
tb_check "a dead letter is logged per message" \
  grep -q '"topic":"payments","partition":[0-9]*,"offset":[0-9]*,.*Dead-lettering' "$TB_DIR/run.log"
for f in run.log migrate.log check.log check.out replay.log stats.log badpw.log; do
  tb_check "$f: the database password is not logged" bash -c '! grep -qF -- "$1" "$2"' _ "$pw" "$TB_DIR/$f"
  tb_check "$f: the sasl.password is not logged" bash -c '! grep -qF -- "$1" "$2"' _ "$kpw" "$TB_DIR/$f"
done
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
