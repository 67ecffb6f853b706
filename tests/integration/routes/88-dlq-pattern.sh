#!/usr/bin/env bash
# 88: dead letters do not come round through a pattern. Route a consumes
# ^pay-[a-z]+$ (dead letters to "<topic>.dlq"), route b ^pay-[a-z]+[.]dlq$:
# the loader cannot tell that b's pattern matches a's dead-letter topics
# until one exists. A conflict in pay-eu is dead-lettered to pay-eu.dlq,
# which dedupd's dead-letter producer creates after the start; when the
# group assigns it, run does not consume it: an error names it, the gauge
# dedupd_dead_letter_partitions_skipped counts its partition, nothing of it
# is applied by route b or committed, and pay-eu goes on being applied.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init dlq_pattern
tb_mock pay-eu:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_KAFKA_PROPS="topic.metadata.refresh.interval.ms=500" tb_config_routes "
  { name = \"a\"; topics = [\"^pay-[a-z]+\$\"]; key = \"a:\${id}\"; table = \"dedup_a\";
    handler = { path = \"$DD_TEST_HANDLER_DIR/th_scripted.so\"; }; },
  { name = \"b\"; topics = [\"^pay-[a-z]+[.]dlq\$\"]; key = \"b:\${id}\"; table = \"dedup_b\";
    handler = { path = \"$DD_TEST_HANDLER_DIR/th_scripted.so\"; }; }" \
  "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

tb_start run
pid=$TB_LAST_PID
log_has() { grep -q "$1" "$TB_DIR/run.log"; }
tb_wait_until 30 "pay-eu assigned" log_has "Assigned pay-eu " || tb_die "pay-eu was not assigned"
printf '0\t-\t{"id":"x1","v":1}\n0\t-\t{"id":"x1","v":2}\n' | tb_produce pay-eu 2>/dev/null ||
  tb_die "produce failed"
tb_check "the conflict is dead-lettered to pay-eu.dlq" \
  tb_wait_until 30 "a dead letter" bash -c "test \"\$(\"$DDTK\" consume -b $TB_BROKERS -t pay-eu.dlq 2>/dev/null | wc -l)\" -eq 1"
tb_check "pay-eu.dlq is assigned, and not consumed" \
  tb_wait_until 30 "the error" log_has "Not consuming topic pay-eu.dlq: the topics of route b"
tb_check "the error names route a's dead letters" log_has "it is a dead-letter topic of route a"
skipped() { th_scrape; test "$(th_metric dedupd_dead_letter_partitions_skipped)" = "$(grep -c 'Assigned pay-eu.dlq \[' "$TB_DIR/run.log")"; }
tb_check "the gauge counts its partitions" tb_wait_until 10 "the gauge" skipped
tb_check "(it has some)" grep -q "Assigned pay-eu.dlq \\[0\\]" "$TB_DIR/run.log"
printf '0\t-\t{"id":"x2"}\n' | tb_produce pay-eu 2>/dev/null || tb_die "produce failed"
applied_x2() { test "$(tb_sql "SELECT COUNT(*) FROM dedup_a WHERE biz_key = 'a:x2' AND status = 1")" = 1; }
tb_check "pay-eu goes on being applied" tb_wait_until 30 "a:x2" applied_x2
sleep 2
tb_eq "route b applied no dead letter" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_b')"
tb_eq "nothing of route b's in the business table" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key LIKE 'b:%'")"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "run stops cleanly" 0 "$rc"
tb_eq "route a: x1 once, x2 once" "a:x1 1
a:x2 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "pay-eu committed past all three" "0 3" "$(tb_committed tg pay-eu)"
tb_eq "nothing committed on pay-eu.dlq" "$(tb_committed never-used-group pay-eu.dlq)" \
  "$(tb_committed tg pay-eu.dlq)"
tb_done
