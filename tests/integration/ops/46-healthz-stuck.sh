#!/usr/bin/env bash
# 46: /healthz reports a stall. A handler that hangs (th_scripted "sleep")
# holds a message in flight with nothing finishing for longer than
# http.stuck_after: /healthz turns 503 and says why, and the log says what
# the consumer waits for (the handler); once the handler returns, it is 200
# again, and the message is applied exactly once.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init healthz_stuck
tb_mock events:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; stuck_after = \"2s\"; };"
tb_migrate || tb_die "migrate failed"

# The broker down at start: the consumer says it waits for the group.
tb_mock_ctl "broker-down 1"
tb_start run
pid=$TB_LAST_PID
tb_check "with the broker down, the log says the consumer waits for the group" \
  tb_wait_until 15 "a line saying so" grep -q \
  'msg="Waiting for the group tg to assign partitions (asked [0-9]* s ago)' "$TB_DIR/run.log"
tb_mock_ctl "broker-up 1"
th_wait_status 30 200 /readyz || tb_die "/readyz never became ready: $(th_body /readyz)"
tb_eq "/healthz 200 while idle" 200 "$(th_status /healthz)"

printf '0\t-\t{"id":1,"th":"sleep:12000"}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
th_wait_status 8 503 /healthz || tb_die "/healthz stayed $(th_status /healthz) with the handler hung"
tb_ok "/healthz 503 while a message is stuck in the handler"
tb_check "/healthz says what is stuck" grep -q "in flight and none finished" <(th_body /healthz)
_applied() { [[ "$(tb_sql 'SELECT COUNT(*) FROM th_effect')" == 1 ]]; }
tb_wait_until 30 "the hung message applied" _applied || tb_die "the message was never applied"
th_wait_status 10 200 /healthz || tb_die "/healthz stayed $(th_status /healthz) after the handler returned"
tb_ok "/healthz back to 200 once the message finished"
tb_check "the log said what the consumer waited for" grep -Eq \
  'msg="Waiting for the handler: lane 0 has been inside it for [0-9]+ s\. 1 message\(s\) in flight, none finished for [0-9]+ s\."' \
  "$TB_DIR/run.log"


rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_eq "applied exactly once" 1 "$(tb_sql 'SELECT SUM(n) FROM th_effect')"
tb_assert_committed_at_end
tb_done
