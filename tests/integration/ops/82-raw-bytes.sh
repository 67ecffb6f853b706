#!/usr/bin/env bash
# 82: bytes that must not pass as they are.
#  - HTTP: a request target with a NUL (raw, or escaped as %00), another
#    control byte or a space is answered 400, never as the path before it
#    (GET /healthz\0 is not /healthz); the plain paths, with a query, still
#    answer 200;
#  - `dedupd stats` (text) prints a failed row's stored error with its
#    control bytes escaped (a terminal escape sequence in an error a handler
#    stored is shown as \x1b..., not sent to the terminal); --format json
#    keeps it exact.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init raw_bytes
tb_mock events:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"
printf '0\t-\t{"id":1,"th":"reject"}\n0\t-\t{"id":2,"th":"ok"}\n' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /readyz || tb_die "never ready: $(th_body /readyz)"

# raw TARGET: the status line's code for "GET TARGET HTTP/1.1" sent as bytes
# (TARGET a Python bytes literal's content).
raw() {
  python3 - "$port" "$1" <<'PY'
import ast, socket, sys
port, target = int(sys.argv[1]), ast.literal_eval("b'" + sys.argv[2] + "'")
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
line = data.split(b"\r\n", 1)[0].decode("latin-1")
print(line.split(" ")[1] if " " in line else "none")
PY
}
tb_eq "GET /healthz: 200" 200 "$(raw '/healthz')"
tb_eq "GET /readyz?verbose=1: 200" 200 "$(raw '/readyz?verbose=1')"
tb_eq 'GET /healthz\0: 400' 400 "$(raw '/healthz\x00')"
tb_eq 'GET /healthz\0junk: 400' 400 "$(raw '/healthz\x00junk')"
tb_eq 'GET /readyz\0: 400' 400 "$(raw '/readyz\x00')"
tb_eq 'GET /healthz%00: 400' 400 "$(raw '/healthz%00')"
tb_eq 'GET /healthz%0d%0a: 400' 400 "$(raw '/healthz%0d%0a')"
tb_eq 'GET /healthz\x1b: 400' 400 "$(raw '/healthz\x1b')"
tb_eq 'GET /health z (a space): 400' 400 "$(raw '/health z')"
tb_eq "/healthz still 200 afterwards" 200 "$(th_status /healthz)"
tb_check "dedupd is still running" kill -0 "$pid"

done2() { [[ "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')" == 2 ]]; }
tb_wait_until 30 "both messages finished" done2 || tb_die "the messages were not finished"
tb_stop "$pid" || tb_not_ok "dedupd run exited non-zero after SIGTERM"
tb_eq "one failed row (the rejected message)" 1 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 2')"
# As a handler that quotes the payload in its error would store it.
tb_sql "UPDATE dedup_record SET error = CONCAT('evil ', CHAR(27), '[2J', CHAR(7), ' end') WHERE status = 2"
"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.txt" 2>&1 || tb_die "dedupd stats failed: $(cat "$TB_DIR/stats.txt")"
tb_check "stats (text) sends no escape byte to the terminal" bash -c "! grep -q \$'\\x1b' '$TB_DIR/stats.txt'"
tb_check "stats (text) shows the error escaped" grep -qF 'evil \x1b[2J\x07 end' "$TB_DIR/stats.txt"
"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.err" ||
  tb_die "dedupd stats --format json failed"
tb_check "stats (json) keeps the error exact" python3 -c '
import json, sys
def strings(o):
    if isinstance(o, dict): o = list(o.values())
    if isinstance(o, list): return [s for v in o for s in strings(v)]
    return [o] if isinstance(o, str) else []
assert "evil \x1b[2J\x07 end" in strings(json.load(open(sys.argv[1])))' "$TB_DIR/stats.json"
tb_done
