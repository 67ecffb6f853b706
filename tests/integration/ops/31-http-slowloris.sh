#!/usr/bin/env bash
# 31: the HTTP endpoint under slow and many clients. 80 connections that
# each send a header line every 3 s (and reopen what the server closes)
# must not keep /healthz and /metrics, asked from another address, from
# answering within 2 s (times TB_TIMEOUT_MULT in a slow build, still short
# of http.timeout) every time; a client that trickles a header line every second is still closed
# once http.timeout has passed since it connected; and a burst of malformed
# requests is not a warning per request.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init http_slowloris
tb_mock events:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"
tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /readyz || tb_die "/readyz never became ready: $(th_body /readyz)"

# slow.py PORT COUNT INTERVAL SECONDS STATUS REOPEN: keeps COUNT connections
# that sent a request line and then send one header line every INTERVAL
# seconds, never ending the request; with REOPEN, replaces the ones the
# server closes (at most COUNT a second). STATUS gets "opened N open N
# closed N minlife S maxlife S": connections opened, open now, closed by the
# server, and the shortest and longest time one stayed open until then.
cat >"$TB_DIR/slow.py" <<'PY'
import os, select, socket, sys, time
port, count, interval, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
status, reopen = sys.argv[5], sys.argv[6] == "1"
conns, opened, closed, minlife, maxlife = {}, 0, 0, 0.0, 0.0
end = time.monotonic() + secs
budget, budget_t = count, time.monotonic()
while time.monotonic() < end and (reopen or opened < count or conns):
    now = time.monotonic()
    if now - budget_t >= 1:
        budget, budget_t = count, now
    while len(conns) < count and budget > 0 and (reopen or opened < count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")
            s.setblocking(False)
        except OSError:
            budget = 0
            break
        conns[s] = [now, now]
        opened += 1
        budget -= 1
    gone = []
    if conns:
        readable, _, _ = select.select(list(conns), [], [], 0.2)
        gone += readable  # the server answered (an error) or closed: either ends it
    else:
        time.sleep(0.2)
    now = time.monotonic()
    for s, t in conns.items():
        if s not in gone and now - t[1] >= interval:
            try:
                s.send(b"X-Slow: 1\r\n")
                t[1] = now
            except OSError:
                gone.append(s)
    for s in set(gone):
        life = now - conns.pop(s)[0]
        minlife = life if closed == 0 else min(minlife, life)
        maxlife = max(maxlife, life)
        closed += 1
        s.close()
    with open(status + ".tmp", "w") as f:
        f.write("opened %d open %d closed %d minlife %.1f maxlife %.1f\n"
                % (opened, len(conns), closed, minlife, maxlife))
    os.replace(status + ".tmp", status)
PY
slow_field() { awk -v f="$1" '{ for (i = 1; i < NF; i += 2) if ($i == f) print $(i + 1) }' "$2"; }

# timed PATH: "CODE SECONDS" of one GET (code 000: no answer within 5 s,
# longer in a slow build), from 127.0.0.2: a prober has an address of its
# own (kubelet probes come from the node), so the slow clients, all from
# 127.0.0.1, fill only their own address's http.max_connections_per_ip.
timed() {
  python3 - "$port" "$1" "$(tb_secs 5)" <<'PY'
import http.client, sys, time
t0 = time.monotonic()
try:
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=float(sys.argv[3]),
                                   source_address=("127.0.0.2", 0))
    c.request("GET", sys.argv[2])
    r = c.getresponse()
    r.read()
    code = r.status
    c.close()
except Exception:
    code = 0
print("%03d %.2f" % (code, time.monotonic() - t0))
PY
}

# 1: 80 slow clients, reopening; /healthz and /metrics every second.
tb_bg slow python3 "$TB_DIR/slow.py" "$port" 80 3 60 "$TB_DIR/slow1.status" 1
slow_pid=$TB_LAST_PID
_slow_opened() { [[ -s "$TB_DIR/slow1.status" ]] && (($(slow_field opened "$TB_DIR/slow1.status") >= 80)); }
tb_wait_until 20 "80 slow connections opened" _slow_opened || tb_die "the slow clients did not connect"
sleep 1
good=0 tries=0 bad="" limit=$(tb_secs 2)
for round in $(seq 1 8); do
  for path in /healthz /metrics; do
    read -r code secs < <(timed "$path")
    tries=$((tries + 1))
    if [[ "$code" == 200 ]] && awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s < l) }'; then
      good=$((good + 1))
    else
      bad+=" $path:$code/${secs}s"
    fi
  done
  sleep 1
done
tb_log "slow clients: $(cat "$TB_DIR/slow1.status")"
tb_eq "with 80 slow clients, /healthz and /metrics answered 200 within $limit s every time$bad" \
  "$tries" "$good"
kill "$slow_pid" 2>/dev/null || true
wait "$slow_pid" 2>/dev/null || true

# 2: three clients under every limit, each sending a header line every
# second: the idle timeout never fires, the deadline for a whole request
# (http.timeout, 10 s) does.
# (the deadline is checked on the server's timer, later in a slow build)
late=$((10 + $(tb_secs 3)))
python3 "$TB_DIR/slow.py" "$port" 3 1 "$((late + 3))" "$TB_DIR/slow2.status" 0
tb_log "trickling clients: $(cat "$TB_DIR/slow2.status")"
tb_eq "the server closed all 3 trickling clients" 3 "$(slow_field closed "$TB_DIR/slow2.status")"
lives="$(slow_field minlife "$TB_DIR/slow2.status") $(slow_field maxlife "$TB_DIR/slow2.status")"
tb_check "... 9 to $late s after they connected (${lives/ / to } s)" \
  awk -v a="${lives% *}" -v b="${lives#* }" -v l="$late" 'BEGIN { exit !(a >= 9 && b <= l) }'

# 3: 100 malformed requests do not log a warning each.
warns_before=$(grep -c 'level=warn' "$TB_DIR/run.log" || true)
python3 - "$port" <<'PY'
import socket, sys
for i in range(100):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    try:
        s.sendall(b"BLAH\r\n\r\n" if i % 2 else b"GET / HTTP/9.9\r\n\r\n")
        s.recv(1000)
    except OSError:
        pass
    s.close()
PY
sleep 1
warns=$(($(grep -c 'level=warn' "$TB_DIR/run.log" || true) - warns_before))
tb_check "100 malformed requests logged $warns warning(s), not one each" test "$warns" -le 2
tb_eq "/healthz still answers" 200 "$(th_status /healthz)"

rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_done
