#!/usr/bin/env bash
# 38: handlers of every ABI version apply each message exactly once.
# th_abi_v1 and th_abi_v2 are built against the frozen ABI 1 and ABI 2
# headers (tests/abi/), with canaries after their descriptors that a dedupd
# reading fields they do not have would call; th_v3 uses what ABI 3 added:
# init_host and host->log, the messages' Kafka headers, conn_init/conn_fini
# and the connection's state in handle_conn/handle_batch_conn. Each runs on
# its own topic: 20 keys, each delivered twice, in batches of up to 5, the
# last three keys making their batches go message by message ("single"),
# so both paths run.
# End state: one effect per key, none twice; v2 and v3 used both paths; v3
# saw every message's headers and, in every call, the state its own
# connection's conn_init made, also after the connections were killed and
# the lanes reconnected (conn_fini for the old one, conn_init for the new);
# its log lines came through dedupd's logger with the message's fields.
# th_abi_v5 is built against the frozen ABI 5 header (the host API before
# emit): it loads, gets the host fields it knows and applies once.
source "$(dirname "$0")/../lib.sh"
tb_init handler_abi
tb_mock v1:1 v2:1 v3:1 v5:1
export TB_KEY='${c}:${id}' TB_WORKERS=2 TB_BATCH_MAX=5 TB_BATCH_WAIT_MS=100

# produce TOPIC FROM TO [ddtk -H args]: ids FROM..TO, each twice.
produce() {
  local c="$1" from="$2" to="$3" i copy single
  shift 3
  for copy in 1 2; do
    for i in $(seq "$from" "$to"); do
      single=$( ((i > 17 && i <= 20)) && echo ',"single":true' || true)
      printf '0\t-\t{"c":"%s","id":%d%s}\n' "$c" "$i" "$single"
    done
  done | "$DDTK" produce -b "$TB_BROKERS" -t "$c" "$@" 2>/dev/null || tb_die "produce to $c failed"
}

# expect_once TOPIC TABLE N: N keys applied, each effect once.
expect_once() {
  tb_eq "$1: $3 keys applied" "$3" \
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1 AND biz_key LIKE '$1:%'")"
  tb_eq "$1: one effect per key, none twice" "$3 $3" \
    "$(tb_sql "SELECT COUNT(*), COALESCE(SUM(n), 0) FROM $2" | tr '\t' ' ')"
}

for v in 1 2 5 3; do # v3 last: the log checks below read its run
  so=th_abi_v$v
  [[ $v == 3 ]] && so=th_v3
  TB_TOPIC=v$v TB_GROUP=g$v TB_HANDLER="$DD_TEST_HANDLER_DIR/$so.so" \
    TB_HANDLER_CONFIG='tag = "t38";' tb_config "$TB_DIR/v$v.conf"
  tb_migrate || tb_die "migrate v$v failed"
  if [[ $v == 3 ]]; then
    produce v3 1 20 -H trace-id=tr-1 -H tenant=acme
  else
    produce "v$v" 1 20
  fi
  tb_run || tb_die "dedupd run with $so failed"
  tb_assert_committed_at_end "g$v" "v$v"
done
expect_once v1 th_v1_effect 20
expect_once v2 th_v2_effect 20
expect_once v3 th_v3_effect 20
expect_once v5 th_v5_effect 20
tb_eq "v5: every message's shard is 0 (one database)" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM th_v5_effect WHERE shard <> 0")"
for t in th_v2_effect th_v3_effect th_v5_effect; do
  tb_eq "$t: handle_batch and handle both applied messages" "batch single" \
    "$(tb_sql "SELECT GROUP_CONCAT(DISTINCT path ORDER BY path SEPARATOR ' ') FROM $t")"
done
tb_eq "v3: every message's headers, in every call (trace-id, 2 headers)" "20" \
  "$(tb_sql "SELECT COUNT(*) FROM th_v3_effect WHERE trace = 'tr-1' AND hdr_cnt = 2")"
tb_eq "v3: every call had its own connection's state" "0" \
  "$(tb_sql "SELECT COUNT(*) FROM th_v3_effect WHERE conn_ok <> 1")"
tb_eq "v3: conn_init once per lane connection" 2 "$(tb_sql "SELECT COUNT(*) FROM th_v3_conn")"
log=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
tb_check "v3: init_host got the host API and handler.config" \
  grep -qE 'level=info msg="handler th_v3: th_v3 init instance=[^:]+:[0-9]+ tag=t38"' <<<"$log"
tb_check "v3: host->log lines carry the message's topic, partition, offset and key" \
  grep -qE 'level=info topic="v3" partition=0 offset=[0-9]+ key="v3:[0-9]+" msg="handler th_v3: th_v3 applied path=(batch|single) trace=.tr-1.' \
  <<<"$log"
tb_eq "v3: conn_fini for each connection at shutdown" 2 \
  "$(grep -c 'msg="handler th_v3: th_v3 conn_fini connection=' <<<"$log")"

# The lanes' connections killed under a running dedupd: each lane calls
# conn_fini for the old one and conn_init for the new one before it goes on.
TB_CONF="$TB_DIR/v3.conf"
tb_start w
w=$TB_LAST_PID
conns_at_least() { test "$(tb_sql "SELECT COUNT(*) FROM th_v3_conn")" -ge "$1"; }
tb_wait_until 30 "the worker's lanes connected" conns_at_least 4 || tb_die "no conn_init"
killed=0
for id in $(tb_sql "SELECT conn_id FROM th_v3_conn ORDER BY id DESC LIMIT 2"); do
  tb_sql "KILL CONNECTION $id" 2>/dev/null && killed=$((killed + 1))
done
produce v3 21 40 -H trace-id=tr-1 -H tenant=acme
applied() { test "$(tb_sql "SELECT COUNT(*) FROM th_v3_effect")" -ge 40; }
tb_wait_until 60 "the new messages applied after the reconnect" applied || tb_die "not applied"
tb_stop "$w" || tb_die "the worker did not stop cleanly"
tb_check "killed both lanes' connections ($killed) and the lanes reconnected" \
  test "$killed" -eq 2 -a "$(grep -c 'reconnected to the database' "$TB_DIR/w.log")" -ge 1
reconnected=$(grep -c 'reconnected to the database' "$TB_DIR/w.log")
tb_eq "v3: a conn_init per connection, the new ones too" $((4 + reconnected)) \
  "$(tb_sql "SELECT COUNT(*) FROM th_v3_conn")"
tb_eq "v3: a conn_fini per connection, the killed ones too" $((2 + reconnected)) \
  "$(grep -c 'msg="handler th_v3: th_v3 conn_fini connection=' "$TB_DIR/w.log")"
expect_once v3 th_v3_effect 40
tb_eq "v3: every call had its own connection's state, after the reconnect too" "0" \
  "$(tb_sql "SELECT COUNT(*) FROM th_v3_effect WHERE conn_ok <> 1")"
tb_done
