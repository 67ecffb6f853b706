#!/usr/bin/env bash
# 79: SIGTERM while every broker is down. dedupd runs with
# shutdown_timeout = "5s" and applies a first part; then all three brokers
# of the mock cluster go down, more is still in flight or queued, and dedupd
# gets SIGTERM. It must end within shutdown_timeout + 15 s whatever the
# brokers do (librdkafka's own close and destroy would wait for them). The
# brokers come back, a second run with --exit-at-end finishes: every key
# applied exactly once, the offsets committed at the end.
source "$(dirname "$0")/../lib.sh"
tb_init sigterm_broker_down
TB_MOCK_BROKERS=3 tb_mock payments:3
# librdkafka's own session timeout (45 s): the other tests shorten it.
TB_KAFKA_PROPS="session.timeout.ms=45000 max.poll.interval.ms=300000 heartbeat.interval.ms=3000" \
  TB_WORKERS=2 TB_BATCH_MAX=20 tb_config "$TB_CONF" 'shutdown_timeout = "5s";'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 600 --dup-min 1 --dup-max 2 --partitions 3 --bad 0 --conflicts 0 --seed 79
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

tb_start run
pid=$TB_LAST_PID
some() { (($(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1") >= 50)); }
tb_wait_until 60 "some keys applied" some || tb_die "nothing applied"
for b in 1 2 3; do tb_mock_ctl "broker-down $b"; done
sleep 3
start=$(date +%s)
rc=0
tb_stop "$pid" || rc=$?
took=$(($(date +%s) - start))
tb_log "SIGTERM with every broker down: exit $rc after $took s"
tb_check "SIGTERM with every broker down ends within shutdown_timeout + 15 s ($took s)" \
  test "$took" -le 20
tb_check "it exited on its own (not killed by the test)" test "$rc" -ne 137
tb_check "the log says it stopped" grep -q 'Stopped' "$TB_DIR/run.log"

for b in 1 2 3; do tb_mock_ctl "broker-up $b"; done
tb_run || tb_die "the second run failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
