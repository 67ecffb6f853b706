#!/usr/bin/env bash
# 43: DEDUPD_<SECTION>_<NAME> environment variables override the file, for
# containers: dedup.table (rows land in the other table, the file's table is
# never created), workers, http.listen, log.format. A bad value fails startup
# and the message names the variable. An empty variable unsets an optional
# setting (DEDUPD_HTTP_LISTEN= turns off the endpoint the file sets up); for
# a required one it fails startup naming the variable.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init env_override
tb_mock payments:2
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
tb_config   # file: dedup_record, 2 workers, no http, logfmt
export DEDUPD_DEDUP_TABLE=other_table DEDUPD_WORKERS=3 DEDUPD_HTTP_LISTEN="127.0.0.1:$port"
export DEDUPD_LOG_FORMAT=json
tb_migrate || tb_die "migrate failed"
tb_gen --keys 40 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 43
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /healthz || tb_die "DEDUPD_HTTP_LISTEN: no endpoint on $port"
tb_ok "DEDUPD_HTTP_LISTEN serves /healthz on $port"
_consumed() { th_scrape; [[ "$(th_metric 'dedupd_messages_total{route="default"}')" == "$n" && "$(th_metric dedupd_inflight_messages)" == 0 ]]; }
tb_wait_until 60 "stream consumed" _consumed || tb_not_ok "stream not consumed"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_eq "DEDUPD_DEDUP_TABLE: rows in other_table" 40 \
  "$(tb_sql 'SELECT COUNT(*) FROM other_table WHERE status = 1')"
tb_eq "DEDUPD_DEDUP_TABLE: the file's table was never created" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'dedup_record'")"
tb_check "DEDUPD_WORKERS: 3 workers" grep -q '3 worker(s)' "$TB_DIR/run.log"
tb_check "DEDUPD_LOG_FORMAT: every log line is JSON" python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    if line.startswith("summary "):
        continue
    json.loads(line); n += 1
sys.exit(n == 0)' "$TB_DIR/run.log"
tb_assert_committed_at_end

# Bad values: startup fails, exit 1, the message names the variable.
_bad() {
  local var="$1" val="$2" out rc=0
  out=$(env "$var=$val" timeout --foreground "$(tb_secs 30)" "$DEDUPD" run -c "$TB_CONF" 2>&1) || rc=$?
  tb_eq "bad $var=$val: exit 1" 1 "$rc"
  tb_check "bad $var: the error names the variable" grep -q "environment variable $var" <<<"$out"
}
_bad DEDUPD_WORKERS abc
_bad DEDUPD_WORKERS 0
_bad DEDUPD_DEDUP_TABLE 'x;DROP TABLE other_table'
_bad DEDUPD_HTTP_LISTEN nonsense
_bad DEDUPD_LOG_LEVEL loud
_bad DEDUPD_KAFKA_BROKERS ''
_bad DEDUPD_MYSQL_DATABASE ''
tb_eq "other_table survived" 40 "$(tb_sql 'SELECT COUNT(*) FROM other_table')"

# The file sets http.listen; DEDUPD_HTTP_LISTEN= turns the endpoint off.
port2=$(tb_free_port)
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port2\"; };"
DEDUPD_HTTP_LISTEN='' tb_start unset
pid=$TB_LAST_PID
tb_wait_until 30 "the consumer joins" grep -q 'Joining the group' "$TB_DIR/unset.log" ||
  tb_not_ok "DEDUPD_HTTP_LISTEN=: the consumer did not start: $(tail -n 3 "$TB_DIR/unset.log")"
TH_URL="http://127.0.0.1:$port2"
tb_eq "DEDUPD_HTTP_LISTEN=: nothing answers on the file's port $port2" 000 "$(th_status /healthz)"
tb_check "DEDUPD_HTTP_LISTEN=: no endpoint was started" bash -c '! grep -q "HTTP endpoint listening" "$1"' \
  _ "$TB_DIR/unset.log"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "DEDUPD_HTTP_LISTEN=: SIGTERM, exit 0" 0 "$rc"
tb_done
