#!/usr/bin/env bash
# 110: systemd's protocols, with a fake NOTIFY_SOCKET (a datagram socket
# this test reads) and a fake JOURNAL_STREAM. `dedupd run` sends READY=1
# only once partitions are assigned (after the "Assigned" line), WATCHDOG=1
# every WATCHDOG_USEC/2 while live, none while a message stalls longer than
# http.stuck_after (the rule /healthz answers with) and again after,
# STOPPING=1 on SIGTERM. With stderr the stream JOURNAL_STREAM names,
# every line starts with its syslog priority (<6> info, <4> warn); with
# stderr another file, none does.
source "$(dirname "$0")/../lib.sh"
tb_init systemd_notify
tb_mock events:2
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
tb_config "$TB_CONF" 'http = { stuck_after = "2s"; };'
tb_migrate || tb_die "migrate failed"

SOCK="$TB_DIR/notify.sock"
python3 - "$SOCK" "$TB_DIR/notify.txt" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "w", buffering=1) as out:
    while True:
        msg = s.recv(4096).decode()
        for line in msg.split("\n"):
            out.write("%.3f %s\n" % (time.time(), line))
PY
TB_PIDS+=("$!")
tb_wait_until 10 "the fake notify socket" test -S "$SOCK" || tb_die "no notify socket"

printf '0\t-\t{"id":"a"}\n1\t-\t{"id":"b"}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
: >"$TB_DIR/j.log"
stream=$(stat -c '%d:%i' "$TB_DIR/j.log")
NOTIFY_SOCKET="$SOCK" WATCHDOG_USEC=1000000 JOURNAL_STREAM="$stream" \
  "$DEDUPD" run -c "$TB_CONF" 2>>"$TB_DIR/j.log" &
pid=$!
TB_PIDS+=("$pid")
count() { grep -c " $1$" "$TB_DIR/notify.txt" || true; }
at_least() { (($(count "$1") >= $2)); }
tb_check "READY=1 sent" tb_wait_until 60 "READY=1" at_least READY=1 1
tb_check "... saying the partitions it consumes" grep -q ' STATUS=consuming 2 partition(s)$' "$TB_DIR/notify.txt"
ready_at=$(awk '$2 == "READY=1" { print $1; exit }' "$TB_DIR/notify.txt")
assigned_at=$(sed -n 's/^<6>ts="\([^"]*\)".*msg="Assigned events .*/\1/p' "$TB_DIR/j.log" | tail -n 1)
tb_check "... after the partitions were assigned ($assigned_at)" python3 -c '
import datetime, sys
a = datetime.datetime.strptime(sys.argv[2], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
sys.exit(not float(sys.argv[1]) >= a - 0.01)' "$ready_at" "$assigned_at"
tb_check "WATCHDOG=1 every half second while live" tb_wait_until 10 "4 watchdog pings" at_least WATCHDOG=1 4

# a stall: the handler sleeps 5 s, longer than http.stuck_after (2 s)
printf '0\t-\t{"id":"slow","th":"sleep:5000"}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
tb_check "the stall is told in STATUS" tb_wait_until 20 "STATUS=stuck" grep -q ' STATUS=stuck: ' "$TB_DIR/notify.txt"
stuck_at=$(awk '$2 ~ /^STATUS=stuck/ { print $1; exit }' "$TB_DIR/notify.txt")
tb_check "the watchdog fed again after the stall" tb_wait_until 20 "live again" grep -q ' STATUS=live again$' "$TB_DIR/notify.txt"
live_at=$(awk '$2 == "STATUS=live" { print $1; exit }' "$TB_DIR/notify.txt")
gap=$(awk -v a="$stuck_at" -v b="$live_at" '$2 == "WATCHDOG=1" && $1 > a && $1 < b { n++ } END { print n + 0 }' "$TB_DIR/notify.txt")
tb_eq "no WATCHDOG=1 while stuck" 0 "$gap"
tb_check "the stall logged at warn, with its priority" grep -q '^<4>ts=.*Not feeding the systemd watchdog: stuck' "$TB_DIR/j.log"

kill -TERM "$pid"
wait "$pid" || tb_not_ok "run exited non-zero"
tb_check "STOPPING=1 on SIGTERM" grep -q ' STOPPING=1$' "$TB_DIR/notify.txt"
tb_eq "every message applied" 3 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "every line of the journal stream carries a priority" 0 "$(grep -cv '^<[3467]>ts=' "$TB_DIR/j.log")"
tb_check "info lines are <6>" grep -q '^<6>ts=.* level=info ' "$TB_DIR/j.log"
tb_eq "... and only info lines" 0 "$(grep '^<6>' "$TB_DIR/j.log" | grep -vc ' level=info ' || true)"

# stderr is not the stream JOURNAL_STREAM names: no prefix
JOURNAL_STREAM="$stream" "$DEDUPD" migrate -c "$TB_CONF" >/dev/null 2>"$TB_DIR/other.log" || true
tb_check "another stderr: lines as they are" grep -q '^ts=' "$TB_DIR/other.log"
tb_eq "... no priority prefix" 0 "$(grep -c '^<[0-7]>' "$TB_DIR/other.log" || true)"
tb_done
