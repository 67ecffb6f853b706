#!/usr/bin/env bash
# 42: retention. `dedupd stats` describes the table (as text, and as JSON with
# the group's offsets and lag, read without joining the group: a running
# consumer does not rebalance); `dedupd purge --dry-run` counts what a purge
# would delete and deletes nothing; `dedupd purge` deletes exactly the
# expired rows in state 1 and 2, purge.batch rows per transaction, never a
# row in state 0 nor one that has not expired; the background purge of
# `dedupd run` (purge.interval) does the same while the consumer runs. `dedupd check` refuses a ttl shorter than twice the
# idempotency window computed from the timeouts and retries.
source "$(dirname "$0")/../lib.sh"
tb_init purge
tb_mock payments:2
tb_config "$TB_CONF" "purge = { interval = \"0\"; batch = 3; };"
tb_migrate || tb_die "migrate failed"

# _rows PREFIX COUNT STATUS EXPIRE_SQL [ERROR]: inserts rows directly.
_rows() {
  local sql="INSERT INTO dedup_record (biz_key, request_hash, status, error, topic, kpartition,"
  sql+=" koffset, created_at, expire_at) VALUES "
  for i in $(seq 1 "$2"); do
    ((i > 1)) && sql+=","
    sql+="('$1:$i', UNHEX(SHA2('$1:$i', 256)), $3, ${5:-NULL}, 'payments', 0, $i,"
    sql+=" NOW(6) - INTERVAL 10 DAY, $4)"
  done
  tb_sql "$sql"
}
past='NOW(6) - INTERVAL 1 DAY'
future='NOW(6) + INTERVAL 1 DAY'
_rows old-applied 7 1 "$past"
_rows old-failed 3 2 "$past" "'scripted reject'"
_rows old-processing 2 0 "$past"
_rows new-applied 4 1 "$future"
_rows new-failed 1 2 "$future" "'amount must be positive'"
_rows new-processing 1 0 "$future"

# stats: "label   value" lines.
"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.txt" 2>&1 || tb_die "dedupd stats failed: $(cat "$TB_DIR/stats.txt")"
_stat() { awk -v l="$1" 'index($0, l) == 1 { v = substr($0, length(l) + 1); sub(/^ +/, "", v); print v; exit }' "$TB_DIR/stats.txt"; }
tb_eq "stats: rows" 18 "$(_stat 'rows ')"
tb_eq "stats: applied" 11 "$(_stat '  applied (status 1)')"
tb_eq "stats: failed" 4 "$(_stat '  failed (status 2)')"
tb_eq "stats: processing" 3 "$(_stat '  processing (status 0)')"
tb_eq "stats: expired awaiting purge" 10 "$(_stat 'expired, awaiting purge')"
tb_eq "stats: expired still processing" "2 (status 0: never purged)" "$(_stat 'expired, still processing')"
tb_check "stats: oldest row is 10 days old" grep -q '^oldest row .*(created 10d 0h ago)$' "$TB_DIR/stats.txt"
tb_check "stats: failed rows by error" grep -q '^ *3  scripted reject$' "$TB_DIR/stats.txt"
tb_check "stats: says conflicts are not in the table" \
  grep -q 'conflicts are not stored in the table' "$TB_DIR/stats.txt"

# stats --format json: the same figures, parsed.
"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.err" ||
  tb_die "dedupd stats --format json failed: $(cat "$TB_DIR/stats.err")"
sj() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TB_DIR/stats.json" "$1"; }
tb_eq "stats json: rows by status" "18 11 4 3 0" \
  "$(sj '" ".join(str(s["table"][k]) for k in ("rows", "applied", "failed", "processing", "unknown_status"))')"
tb_eq "stats json: expired" "10 2" "$(sj '"%d %d" % (s["table"]["expired_awaiting_purge"], s["table"]["expired_processing"])')"
tb_eq "stats json: oldest row 10 days old" 10 "$(sj 's["table"]["oldest_age_s"] // 86400')"
# Times in UTC with a Z, as the logs: the instant of the oldest created_at.
oldest_utc=$(python3 -c 'import datetime,sys; print(datetime.datetime.fromtimestamp(int(float(sys.argv[1])), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))' \
  "$(tb_sql 'SELECT UNIX_TIMESTAMP(MIN(created_at)) FROM dedup_record')")
tb_eq "stats json: the oldest row's time in UTC, with Z" "$oldest_utc" "$(sj 's["table"]["oldest_created_at"]')"
tb_check "stats: the same time on the text line" grep -q "^oldest row  *$oldest_utc (created" "$TB_DIR/stats.txt"
tb_eq "stats json: failed rows by error" "scripted reject 3" \
  "$(sj '"%s %d" % (s["table"]["failed_by_error"][0]["error"], s["table"]["failed_by_error"][0]["rows"])')"
tb_eq "stats json: retention" "604800 0 3" \
  "$(sj '"%d %d %d" % (s["retention"]["ttl_s"], s["retention"]["purge_interval_s"], s["retention"]["purge_batch"])')"
tb_eq "stats json: the group has no offsets yet, the topic is empty" \
  "tg payments 0 None 0 0|tg payments 1 None 0 0" \
  "$(sj '"|".join("%s %s %d %s %d %d" % (s["group"]["id"], p["topic"], p["partition"], p["committed"], p["end"], p["lag"]) for p in s["group"]["partitions"])')"

# --dry-run counts and deletes nothing.
out=$("$DEDUPD" purge -c "$TB_CONF" --dry-run 2>"$TB_DIR/purge.err") ||
  tb_die "dedupd purge --dry-run failed: $(cat "$TB_DIR/purge.err")"
tb_eq "purge --dry-run output" \
  "would delete 10 expired rows from dedup_record in 4 batches (dry run: nothing deleted)" "$out"
tb_eq "purge --dry-run deleted nothing" 18 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"

out=$("$DEDUPD" purge -c "$TB_CONF" 2>"$TB_DIR/purge.err") || tb_die "dedupd purge failed: $(cat "$TB_DIR/purge.err")"
tb_eq "purge output" "deleted 10 expired rows from dedup_record in 4 batches" "$out"
tb_eq "rows left" 8 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_eq "expired rows in state 0 kept" 2 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'old-processing:%'")"
tb_eq "no expired finished row left" 0 \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE expire_at < NOW(6) AND status <> 0')"
tb_eq "unexpired rows kept" 6 "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'new-%'")"
tb_eq "second purge deletes nothing" "deleted 0 expired rows from dedup_record in 0 batches" \
  "$("$DEDUPD" purge -c "$TB_CONF" 2>/dev/null)"

# Background purge inside `dedupd run`, next to real traffic.
_rows bg-applied 5 1 "$past"
_rows bg-processing 1 0 "$past"
tb_config "$TB_CONF" "purge = { interval = \"1s\"; batch = 2; };"
tb_gen --keys 20 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 42
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
_bg_done() { [[ "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'bg-applied:%'")" == 0 ]]; }
tb_check "background purge deleted the expired rows" tb_wait_until 30 "background purge" _bg_done
tb_check "background purge logged it" tb_wait_until 10 "purge log line" \
  grep -q "Purge deleted 5 expired rows from dedup_record in 3 batches" "$TB_DIR/run.log"
_stream_done() { [[ "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'pay:%'")" == 20 ]]; }
tb_wait_until 60 "stream applied" _stream_done || tb_not_ok "the stream was not applied in time"
# stats beside the running consumer: the group's offsets, and no rebalance.
_committed_all() {
  "$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>>"$TB_DIR/stats.err" &&
    [[ "$(sj 's["group"]["lag"]')" == 0 ]]
}
tb_wait_until 30 "stats: the group's lag is 0" _committed_all ||
  tb_not_ok "stats: the group's lag did not reach 0: $(cat "$TB_DIR/stats.json")"
tb_eq "stats json: committed = end offsets = the watermarks" \
  "$(tb_watermarks | awk '{ print $1, $3, $3 }')" \
  "$(sj '"\n".join("%d %s %d" % (p["partition"], p["committed"], p["end"]) for p in s["group"]["partitions"])')"
"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats2.txt" 2>&1 || tb_not_ok "stats (text) beside the consumer failed"
tb_check "stats text: the group's lag per partition" \
  grep -Eq '^  payments \[0\] +committed [0-9]+, end [0-9]+, lag 0$' "$TB_DIR/stats2.txt"
sleep 3 # a member that joined would have made the group rebalance by now
tb_eq "stats did not join the group: the consumer was assigned once, never revoked" "1 0" \
  "$(grep -c 'The group tg assigned' "$TB_DIR/run.log") $(grep -c 'Revoking' "$TB_DIR/run.log" || true)"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_eq "background purge kept the state-0 row" 1 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'bg-processing:%'")"
tb_eq "the stream was applied next to the purge" 20 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'pay:%' AND status = 1")"
tb_assert_committed_at_end

# check: the window with these settings is 10000 (max.poll.interval.ms) +
# 6000 (session.timeout.ms) + 5000 (auto.commit.interval.ms default) + 30000
# (shutdown_timeout) + 100+200+400+800+1600 (5 retries from 100 ms) = 54.1 s.
TB_TTL=1h tb_config "$TB_CONF" "retry = { max_attempts = 5; };"
out=$("$DEDUPD" check -c "$TB_CONF" 2>&1) || tb_not_ok "check with ttl 1h, 5 attempts failed: $out"
tb_check "check: ttl covers twice the window" \
  grep -q '^ok   ttl: 3600s covers twice the idempotency window (55s)$' <<<"$out"
# Unlimited retries count as 100 attempts: 100 ms doubling to 30 s, then 30 s.
# A shorter ttl is allowed (run starts with it), so check warns as run does.
TB_TTL=1h tb_config "$TB_CONF"
rc=0
out=$("$DEDUPD" check -c "$TB_CONF" 2>&1) || rc=$?
tb_eq "check passes ttl 1h with unlimited retries, as run starts with it" 0 "$rc"
tb_check "check: warns and says why" grep -q '^WARN ttl: dedup.ttl is 3600s, shorter than twice the idempotency window (2833s)' <<<"$out"
tb_done
