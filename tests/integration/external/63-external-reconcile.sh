#!/usr/bin/env bash
# 63: external mode, the compensation scan. Rows stuck processing past their
# lease whose message is gone (inserted here as a dead worker would leave
# them, with no message on the topic) are listed by `dedupd reconcile`, which
# asks the example handler's reconcile() about each and writes nothing;
# `dedupd reconcile --apply` takes each over (token + 1) and settles it:
# sent -> applied, finish() run without a payload; not sent -> failed, "not
# done, message gone: needs manual action"; the store cannot tell -> left
# processing. A row stuck for less than external.scan_after is left to a
# message that may still come. Then `dedupd run` does the same every
# external.scan_interval, its gauges dedupd_processing_stuck and
# dedupd_processing_oldest_seconds report what is left, and a message whose
# takeover reconcile() keeps answering UNKNOWN is dead-lettered
# `unresolved` after external.unknown_attempts. Purge never deletes a
# processing row; replay --apply refuses the handler.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init external_reconcile
tb_mock rc:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=1
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
export NOTIFY_UNKNOWN_PREFIX=n:u
tb_config "$TB_CONF" \
  'external = { lease = "2s"; scan_interval = "1s"; scan_after = "5s"; unknown_attempts = 2; };' \
  'retry = { backoff_initial = "100ms"; backoff_max = "300ms"; };' \
  "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

# stuck KEY TOKEN SECONDS [sent]: a processing row whose lease ran out
# SECONDS ago (negative: still runs), its message gone; "sent": the store
# has token TOKEN's send.
stuck() {
  tb_sql "INSERT INTO dedup_record (biz_key, request_hash, status, owner, lease_until, fence, topic,
          kpartition, koffset, expire_at) VALUES ('$1', UNHEX(SHA2('{\"id\":\"${1#n:}\"}', 256)), 0,
          'dead:$2', NOW(6) - INTERVAL $3 SECOND, $2, 'rc', 0, $2, NOW(6) - INTERVAL 1 SECOND)"
  [[ ${4:-} != sent ]] ||
    tb_sql "INSERT INTO notify_outbox (biz_key, fence, recipient) VALUES ('$1', $2, 'u')"
}
rows() {
  tb_sql "SELECT biz_key, status, fence, COALESCE(JSON_VALUE(response, '\$.reconciled'), '-'),
          COALESCE(error, '-') FROM dedup_record WHERE biz_key LIKE 'n:%' ORDER BY biz_key" | tr '\t' ' '
}
stuck n:d1 3 20 sent
stuck n:d2 1 10 sent
stuck n:n1 2 30
stuck n:u1 4 15
stuck n:y1 1 1 # stuck for less than scan_after
stuck n:f1 1 -60 # a live claim
before=$(rows)

# The list: nothing written.
"$DEDUPD" reconcile -c "$TB_CONF" >"$TB_DIR/list.txt" 2>>"$TB_DIR/reconcile.log" ||
  tb_die "dedupd reconcile failed"
table() { awk -F'\t' '$1 ~ /^n:/ { print $1, $2, $6, $7 }' "$TB_DIR/$1"; }
tb_eq "reconcile lists the rows past scan_after, oldest first, with reconcile()'s answers" \
  "n:n1 2 not_done none
n:d1 3 done none
n:u1 4 unknown none
n:d2 1 done none" "$(table list.txt)"
tb_check "it counts every row past its lease" grep -q '^5 row(s) in processing past their lease' "$TB_DIR/list.txt"
tb_check "it says nothing was written" grep -q 'nothing written (no --apply)' "$TB_DIR/list.txt"
tb_eq "nothing changed" "$before" "$(rows)"

# --apply: taken over, then settled.
"$DEDUPD" reconcile -c "$TB_CONF" --apply >"$TB_DIR/apply.txt" 2>>"$TB_DIR/reconcile.log" ||
  tb_die "dedupd reconcile --apply failed"
tb_eq "--apply settles them under new tokens" \
  "n:n1 3 not_done failed: needs manual action
n:d1 4 done applied
n:u1 5 unknown left processing
n:d2 2 done applied" "$(table apply.txt)"
tb_eq "the rows" \
  "n:d1 1 4 1 -
n:d2 1 2 1 -
n:f1 0 1 - -
n:n1 2 3 - not done, message gone: needs manual action
n:u1 0 5 - -
n:y1 0 1 - -" "$(rows)"
tb_eq "finish() ran for the applied rows, without a payload (no recipient)" "n:d1 4 NULL
n:d2 2 NULL" "$(tb_sql "SELECT biz_key, fence, COALESCE(recipient, 'NULL') FROM notify_log ORDER BY biz_key" | tr '\t' ' ')"
tb_eq "no send was made" 2 "$(tb_sql 'SELECT COUNT(*) FROM notify_outbox')"

# The purge deletes expired finished rows, never processing ones (all these
# expired a second after they were inserted).
"$DEDUPD" purge -c "$TB_CONF" >>"$TB_DIR/reconcile.log" 2>&1 || tb_die "dedupd purge failed"
tb_eq "purge left the processing rows" "n:f1 n:u1 n:y1" \
  "$(tb_sql "SELECT biz_key FROM dedup_record ORDER BY biz_key" | tr '\n' ' ' | sed 's/ $//')"

# The scan of dedupd run, and a message whose takeover stays UNKNOWN.
stuck n:d3 1 10 sent
stuck n:n2 1 10
stuck n:u2 6 10
printf '0\t-\t{"id":"u2"}\n' | tb_produce rc 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
row_is() { test "$(tb_sql "SELECT status, fence FROM dedup_record WHERE biz_key = '$1'" | tr '\t' ' ')" = "$2"; }
tb_check "the scan applies n:d3" tb_wait_until 30 "n:d3" row_is n:d3 "1 2"
tb_check "the scan marks n:n2 failed" tb_wait_until 10 "n:n2" row_is n:n2 "2 2"
tb_check "the scan settles n:y1 once past scan_after (not sent: failed)" \
  tb_wait_until 10 "n:y1" row_is n:y1 "2 2"
unresolved() { test "$(tb_dlq_count unresolved)" = 1; }
tb_check "u2's message, reconcile() answering UNKNOWN twice, is dead-lettered unresolved" \
  tb_wait_until 30 "unresolved" unresolved
tb_eq "u2 recorded failed" \
  "2 reconcile() could not tell whether the effect happened: the notification store cannot tell (test hook)" \
  "$(tb_sql "SELECT status, error FROM dedup_record WHERE biz_key = 'n:u2'" | tr '\t' ' ')"
u1_asked_again() { test "$(tb_sql "SELECT fence > 5 FROM dedup_record WHERE biz_key = 'n:u1'")" = 1; }
tb_check "n:u1 is asked again by the scan (token > 5), and stays processing" \
  tb_wait_until 10 "u1" u1_asked_again
# The gauges: what the last scan counted past its lease (u1 only, now).
gauges() {
  th_scrape
  [[ "$(th_metric 'dedupd_processing_stuck{route="default"}')" == 1 &&
    -n "$(th_metric 'dedupd_processing_oldest_seconds{route="default"}')" ]]
}
tb_check "dedupd_processing_stuck reports the one stuck row" tb_wait_until 20 "gauges" gauges
tb_check "the scan's answers are counted" grep -q '^dedupd_external_reconcile_total{route="default",answer="unknown"} [1-9]' "$TB_DIR/metrics.txt"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "run stops cleanly" 0 "$rc"
tb_eq "the summary counts the dead letter" 1 "$(tb_summary_sum dlq_unresolved "$TB_DIR/run.log")"
tb_eq "u2's offset is committed" "0 1" "$(tb_committed)"

# replay --apply refuses a handler in external mode, saying what to do.
rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply >"$TB_DIR/replay.out" 2>&1 || rc=$?
tb_eq "replay --apply refuses it (exit 1)" 1 "$rc"
tb_check "and says why" grep -q 'replay --apply does not run handlers in external mode' "$TB_DIR/replay.out"
tb_done
