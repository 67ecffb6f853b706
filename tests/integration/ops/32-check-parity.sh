#!/usr/bin/env bash
# 32: `dedupd check` checks what `dedupd run` checks before it starts, in the
# same words. A bad dedup.hash path fails both with one message; a ttl
# shorter than twice the idempotency window is allowed by both, with the
# same warning; a password file others can read is a warning in both,
# naming the file and its mode.
source "$(dirname "$0")/../lib.sh"
tb_init check_parity
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
tb_config
tb_migrate || tb_die "migrate failed"
printf '0\t-\t{"id":1}\n' | tb_produce 2>/dev/null || tb_die "produce failed"

# check_out: runs dedupd check on TB_CONF into $TB_DIR/check.out; sets crc.
check_out() {
  crc=0
  "$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>&1 || crc=$?
  cat "$TB_DIR/check.out" >>"$TB_DIR/check.log"
}
# run_out: the last tb_run's output, with logfmt's \" back to ".
run_out() { tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" | sed 's/\\"/"/g'; }
# run_has PREFIX TEXT: the last run said PREFIX followed by TEXT (not empty).
run_has() { [[ -n "$2" ]] && run_out | grep -qF "$1$2"; }
# text LEVEL WHAT: what check said after "LEVEL WHAT: ".
text() { sed -n "s/^$1 $2: //p" "$TB_DIR/check.out" | head -n 1; }

# The configuration as it is: both quiet.
check_out
tb_eq "a good configuration: check passes" 0 "$crc"
tb_eq "... without warnings" 0 "$(grep -c '^WARN' "$TB_DIR/check.out" || true)"

# 1: a dedup.hash path that does not parse.
TB_DEDUP_EXTRA='hash = ["amount", "items[x"];' tb_config
check_out
tb_eq "bad dedup.hash: check fails" 1 "$crc"
msg=$(text FAIL 'request hash')
tb_check "check names the path: $msg" grep -qF 'items[x' <<<"$msg"
rc=0
tb_run || rc=$?
tb_eq "bad dedup.hash: run fails too" 1 "$rc"
tb_check "run stops with the message check printed" run_has "Stopping: " "$msg"

# 2: a short ttl is valid for run, so check passes it, with run's warning.
TB_TTL=60s tb_config
check_out
tb_eq "ttl 60s: check passes" 0 "$crc"
msg=$(text WARN ttl)
tb_check "check warns: $msg" grep -q 'dedup.ttl is 60s, shorter than twice the idempotency window' <<<"$msg"
tb_check "check says it passed with a warning" grep -q '^check passed, with 1 warning' "$TB_DIR/check.out"
rc=0
tb_run || rc=$?
tb_eq "ttl 60s: run runs" 0 "$rc"
tb_check "run logs the same warning" run_has 'level=warn msg="ttl: ' "$msg"
tb_eq "run applied the message" 1 "$(tb_sql 'SELECT SUM(n) FROM th_effect')"

# 3: a password file its group and others can read.
: >"$TB_DIR/pw"
chmod 644 "$TB_DIR/pw"
TB_MYSQL_EXTRA='password_file = "pw";' tb_config
check_out
tb_eq "password file 0644: check passes" 0 "$crc"
msg=$(text WARN config)
tb_check "check warns, naming the file and its mode: $msg" \
  grep -qF "setting mysql.password_file: $TB_DIR/pw has mode 0644" <<<"$msg"
rc=0
tb_run || rc=$?
tb_eq "password file 0644: run runs" 0 "$rc"
tb_check "run logs the same warning" run_has 'level=warn msg="config: ' "$msg"
chmod 600 "$TB_DIR/pw"
check_out
tb_eq "password file 0600: no warning" 0 "$(grep -c '^WARN' "$TB_DIR/check.out" || true)"
rc=0
tb_run || rc=$?
tb_eq "password file 0600: run runs" 0 "$rc"
tb_eq "... without a warning about it" 0 "$(run_out | grep -c 'password_file' || true)"
tb_assert_committed_at_end
tb_done
