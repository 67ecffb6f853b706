#!/usr/bin/env bash
# 20: startup errors. Bad config values, an unreachable database, a missing
# handler, a handler built for another ABI version, one without the entry
# point: each ends `dedupd run` with a clear message and a non-zero exit,
# and leaves nothing behind: no rows, no committed offsets, no dead letters.
source "$(dirname "$0")/../lib.sh"
tb_init startup_errors
tb_mock events:2
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}'
tb_config
tb_migrate || tb_die "migrate failed"
printf '0\t-\t{"id":1}\n1\t-\t{"id":"bad"\n' | tb_produce 2>/dev/null || tb_die "produce failed"
good_conf=$(cat "$TB_CONF")

# expect_fail WHAT PATTERN: dedupd run on TB_CONF exits non-zero, promptly,
# with PATTERN in its output.
expect_fail() {
  local what="$1" pattern="$2" rc=0 out="$TB_DIR/fail.log"
  timeout --foreground "$(tb_secs 60)" "$DEDUPD" run -c "$TB_CONF" >"$out" 2>&1 || rc=$?
  if ((rc == 0 || rc == 124)); then
    tb_not_ok "$what: exit $rc, expected a prompt failure"
  elif ! grep -qE "$pattern" "$out"; then
    tb_not_ok "$what: message /$pattern/ not found in: $(head -c 600 "$out")"
  else
    tb_ok "$what: exit $rc, $(grep -m 1 -oE "$pattern.{0,60}" "$out")"
  fi
  cat "$out" >>"$TB_DIR/all-failures.log"
}

conf_line() { printf '%s\n%s\n' "$good_conf" "$1" >"$TB_CONF"; }
conf_line 'shutdown_timeout = "soon";'
expect_fail "bad duration" 'dedupd\.conf:[0-9]+.*shutdown_timeout'
conf_line 'retry = { backoff_initial = "10s"; backoff_max = "1s"; };'
expect_fail "backoff_initial > backoff_max" 'dedupd\.conf:[0-9]+.*backoff'
conf_line 'colour = "blue";'
expect_fail "unknown setting" 'dedupd\.conf:[0-9]+.*colour'
printf '%s\n' "${good_conf/workers = 2;/workers = 0;}" >"$TB_CONF"
expect_fail "workers = 0" 'dedupd\.conf:[0-9]+.*workers'

TB_MYSQL_EXTRA='connect_timeout = "1s";' tb_config
sed -i "s|socket = \"[^\"]*\"|socket = \"$TB_DIR/no-such.sock\"|" "$TB_CONF"
expect_fail "unreachable database" "cannot connect to MySQL"

TB_HANDLER="$TB_DIR/no-such-handler.so" tb_config
expect_fail "missing handler" "no-such-handler\.so"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_wrong_abi.so" tb_config
expect_fail "handler with the wrong ABI version" "ABI version"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_no_symbol.so" tb_config
expect_fail "handler without dedupd_handler_v1" "dedupd_handler_v1"

tb_eq "no dedup rows" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_eq "no effects" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no committed offsets" "0 -1
1 -1" "$(tb_committed)"
tb_eq "no dead letters" 0 "$(tb_dlq 2>/dev/null | wc -l)"

# The same configuration, fixed, runs: the failures left nothing in the way.
tb_config
tb_run || tb_die "the fixed configuration does not run"
tb_eq "then: one applied, one dead letter" "1 1" "$(tb_summary applied) $(tb_summary dead_letters)"
tb_assert_committed_at_end
tb_done
