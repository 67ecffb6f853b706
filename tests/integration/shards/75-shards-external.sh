#!/usr/bin/env bash
# 75: external mode over three database shards (mysql.shards), with the
# example notify handler: keys n:ID sharded by the business key (shard_by
# hash: CRC32(key) % 3, MySQL's CRC32() being dedupd's).
#
# Where things live: the handler's "notification service" (notify_outbox,
# notify_fence) is reached through the handler's own connection
# (handler.config), set here to shard 0's server: one service for every
# shard, as a real remote API would be, so "sent exactly once" is one
# count in one place whatever shard a key's claim is in. The dedup rows and
# finish()'s local record (notify_log) are written on the lanes'
# connections, in the shard of their key. (migrate creates the handler's
# tables in every shard; shards 1 and 2 keep their outboxes empty.)
#
# The worker dies right after a send (NOTIFY_CRASH_AFTER_ACT), before
# dedupd could finish its key: left processing, sent. After a restart the
# redelivered message takes the key over in its shard and asks
# reconcile(), which finds the send: every notification sent exactly once,
# each dedup row and notify_log row in the shard the routing names, nothing
# left processing in any shard, offsets at the end. The lease renewer
# renews each claim in its shard: the sends of run 2 take longer than a
# third of the 2 s lease, so every claim is renewed during its send, and
# a renewal sent to another shard would find no row and lose the claim
# (none is lost).
# A key whose row was moved to another shard by hand is dead-lettered
# wrong_shard when its message comes again, and not sent again.
# Then `dedupd reconcile` over the shards: rows planted stuck in shards 2
# and 1 are listed under their shard's line, settled by --apply in their
# shard; with shard 1 down, the others are still scanned and the command
# exits 1 naming it.
source "$(dirname "$0")/../lib.sh"
tb_init shards_external
tb_shards 3
tb_mock notes:2
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=2 TB_BATCH_MAX=5
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
tb_config "$TB_CONF" \
  'external = { lease = "2s"; scan_interval = "1s"; scan_after = "1h"; };' \
  'retry = { backoff_initial = "100ms"; backoff_max = "300ms"; };'
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: the processing index in every shard" "1 1 1" \
  "$(tb_shards_sql "SELECT COUNT(DISTINCT TABLE_NAME) FROM information_schema.STATISTICS
                    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dedup_record'
                    AND INDEX_NAME = 'ix_processing'" | paste -sd' ')"

# 90 notifications over 2 partitions, every third delivered twice.
N=90
seq 1 $N | awk '{ m = sprintf("%d\t-\t{\"id\":\"a%d\",\"to\":\"u%d\",\"text\":\"hi\"}", $1 % 2, $1, $1)
                  print m; if ($1 % 3 == 0) print m }' |
  tb_produce notes 2>/dev/null || tb_die "produce failed"

# Run 1 dies right after its 15th send.
rc=0
NOTIFY_CRASH_AFTER_ACT=15 timeout "$(tb_secs 60)" "$DEDUPD" run -c "$TB_CONF" \
  >>"$TB_DIR/run1.log" 2>&1 || rc=$?
tb_eq "the fault hook killed the worker after a send (exit 9)" 9 "$rc"
# The keys left processing, over the shards, and of those the ones sent
# (the outbox is on shard 0's server).
processing=$(tb_shards_sql "SELECT biz_key FROM dedup_record WHERE status = 0" | sort | paste -sd,)
crashed=$(tb_sql "SELECT COALESCE(GROUP_CONCAT(DISTINCT biz_key ORDER BY biz_key), '') FROM notify_outbox
                  WHERE FIND_IN_SET(biz_key, '$processing')")
tb_log "after the crash: processing: $processing; of them sent: $crashed"
tb_check "a key is left processing with its send done" test -n "$crashed"

# Run 2: the takeovers, each send slowed down past a third of the lease
# (renewed while it runs).
NOTIFY_ACT_SLEEP_MS=800 tb_run || tb_die "run after the crash failed"
tb_eq "every key applied once, over the shards" "$N 0" \
  "$(tb_shards_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" |
    awk '{ a += $1; b += $2 } END { print a, b }')"
tb_eq "nothing left processing in any shard" "0 0 0" \
  "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 0" | paste -sd' ')"
tb_eq "every notification sent exactly once" "$N $N" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_outbox" | tr '\t' ' ')"
for k in 0 1 2; do
  tb_check "shard $k holds keys" test "$(tb_shard_sql $k "SELECT COUNT(*) FROM dedup_record")" -gt 0
  tb_eq "shard $k: every dedup row and notify_log row in the shard its key hashes to" "0 0" \
    "$(tb_shard_sql $k "SELECT (SELECT COUNT(*) FROM dedup_record WHERE CRC32(biz_key) % 3 <> $k),
                               (SELECT COUNT(*) FROM notify_log WHERE CRC32(biz_key) % 3 <> $k)" |
      tr '\t' ' ')"
done
tb_eq "finish() recorded every key once, in its shard" "$N $N" \
  "$(tb_shards_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_log" |
    awk '{ a += $1; b += $2 } END { print a, b }')"
tb_eq "the keys sent before the crash were taken over in their shards (token 2), found sent by token 1" \
  "$(tr ',' '\n' <<<"$crashed" | sed 's/$/ 2 1 1/' | sort)" \
  "$(tb_shards_sql "SELECT biz_key, fence, JSON_VALUE(response, '\$.fence'), JSON_VALUE(response, '\$.reconciled')
                    FROM dedup_record WHERE FIND_IN_SET(biz_key, '$crashed')" | tr '\t' ' ' | sort)"
tb_check "the takeover asked reconcile()" grep -q 'reconcile() says the effect happened' "$TB_DIR/run.log"
tb_check "no claim was lost while sends outlasted a third of the lease" \
  test "$(grep -c 'Lost the claim\|Finished nothing' "$TB_DIR/run.log")" = 0
tb_check "no renewal failed" test "$(grep -c 'Cannot renew the lease' "$TB_DIR/run.log")" = 0
tb_check "the compensation scan ran over the shards without a failure" \
  test "$(grep -c 'Compensation scan.*failed' "$TB_DIR/run.log")" = 0
tb_assert_committed_at_end

# A key of an external route whose row sits in another shard (moved there
# by hand, as a re-shard that went wrong would leave it) is not claimed
# anew in its own: redelivered, it is dead-lettered wrong_shard and sent
# no second time. The layout recorded no change, so the check is asked for
# (mysql.shard_check = skip; auto would not check).
home=$(tb_sql "SELECT CRC32('n:a3') % 3")
away=$(((home + 1) % 3))
row=$(tb_shard_sql "$home" "SELECT HEX(request_hash), fence FROM dedup_record WHERE biz_key = 'n:a3'")
tb_shard_sql "$away" "INSERT INTO dedup_record (biz_key, request_hash, status, fence, topic, kpartition,
              koffset, expire_at) VALUES ('n:a3', UNHEX('$(cut -f1 <<<"$row")'), 1, $(cut -f2 <<<"$row"),
              'notes', 1, 0, NOW(6) + INTERVAL 1 DAY)"
tb_shard_sql "$home" "DELETE FROM dedup_record WHERE biz_key = 'n:a3'"
printf '1\t-\t{"id":"a3","to":"u3","text":"hi"}\n' | tb_produce notes 2>/dev/null ||
  tb_die "produce failed"
DEDUPD_MYSQL_SHARD_CHECK=skip tb_run || tb_die "the run of the redelivered message failed"
tb_eq "the moved key's message is dead-lettered wrong_shard" 1 "$(tb_dlq_distinct wrong_shard notes.dlq)"
tb_check "its error names both shards" bash -c "grep -q 'key n:a3 has a row in shard $away (.*) but its route names shard $home' '$TB_DIR/run.log'"
tb_eq "not claimed again in its own shard" 0 \
  "$(tb_shard_sql "$home" "SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'n:a3'")"
tb_eq "not sent a second time" 1 "$(tb_sql "SELECT COUNT(*) FROM notify_outbox WHERE biz_key = 'n:a3'")"
tb_assert_committed_at_end

# `dedupd reconcile`: a row stuck in shard 2 (sent) and one in shard 1 (not
# sent), their messages gone.
key_in() { # key_in SHARD: the first n:sI in that shard
  local i
  for ((i = 1; i < 100; i++)); do
    [[ $(tb_sql "SELECT CRC32('n:s$i') % 3") == "$1" ]] && { echo "n:s$i"; return; }
  done
}
k2=$(key_in 2)
k1=$(key_in 1)
stuck() { # stuck SHARD KEY TOKEN [sent]
  tb_shard_sql "$1" "INSERT INTO dedup_record (biz_key, request_hash, status, owner, lease_until, fence,
                topic, kpartition, koffset, expire_at) VALUES ('$2', UNHEX(SHA2('{\"id\":\"${2#n:}\"}', 256)),
                0, 'dead:$3', NOW(6) - INTERVAL 20 SECOND, $3, 'notes', 0, $3, NOW(6) + INTERVAL 1 DAY)"
  [[ ${4:-} != sent ]] || tb_sql "INSERT INTO notify_outbox (biz_key, fence, recipient) VALUES ('$2', $3, 'u')"
}
stuck 2 "$k2" 3 sent
stuck 1 "$k1" 1
# "SHARD KEY TOKEN ANSWER ACTION" from the command's output: each row under
# the line naming its shard.
table() {
  awk -F'\t' '/^shard [0-9]+ \(.*\): dedup table dedup_record$/ { s = $0; sub(/^shard /, "", s); sub(/ .*/, "", s) }
              $1 ~ /^n:/ { print s, $1, $2, $6, $7 }' "$TB_DIR/$1"
}
rc=0
DEDUPD_EXTERNAL_SCAN_AFTER=0 "$DEDUPD" reconcile -c "$TB_CONF" >"$TB_DIR/list.txt" \
  2>>"$TB_DIR/reconcile.log" || rc=$?
tb_eq "reconcile lists (exit 0)" 0 "$rc"
tb_eq "a line per shard" "0 1 2" \
  "$(grep -o '^shard [0-9]* (.*): dedup table dedup_record$' "$TB_DIR/list.txt" | cut -d' ' -f2 | paste -sd' ')"
tb_eq "each stuck row listed under its shard, asked, nothing written" \
  "1 $k1 1 not_done none
2 $k2 3 done none" "$(table list.txt | sort)"
tb_eq "nothing changed" "0 1 1" \
  "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 0" | paste -sd' ')"

rc=0
DEDUPD_EXTERNAL_SCAN_AFTER=0 "$DEDUPD" reconcile -c "$TB_CONF" --apply >"$TB_DIR/apply.txt" \
  2>>"$TB_DIR/reconcile.log" || rc=$?
tb_eq "reconcile --apply (exit 0)" 0 "$rc"
tb_eq "--apply settles each in its shard under a new token" \
  "1 $k1 2 not_done failed: needs manual action
2 $k2 4 done applied" "$(table apply.txt | sort)"
tb_eq "shard 2: $k2 applied under token 4, found sent by token 3" "1 4 3 1" \
  "$(tb_shard_sql 2 "SELECT status, fence, JSON_VALUE(response, '\$.fence'), JSON_VALUE(response, '\$.reconciled')
                     FROM dedup_record WHERE biz_key = '$k2'" | tr '\t' ' ')"
tb_eq "shard 2: finish() recorded it there, without a payload" "4 NULL" \
  "$(tb_shard_sql 2 "SELECT fence, COALESCE(recipient, 'NULL') FROM notify_log WHERE biz_key = '$k2'" | tr '\t' ' ')"
tb_eq "shard 1: $k1 failed, needs manual action" "2 2 not done, message gone: needs manual action" \
  "$(tb_shard_sql 1 "SELECT status, fence, error FROM dedup_record WHERE biz_key = '$k1'" | tr '\t' ' ')"
tb_eq "nothing left processing in any shard" "0 0 0" \
  "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 0" | paste -sd' ')"
tb_eq "no send was made" 1 "$(tb_sql "SELECT COUNT(*) FROM notify_outbox WHERE biz_key LIKE 'n:s%'")"

# Shard 1 down: the other shards are scanned, the command fails naming it.
tb_shard_kill9 1
rc=0
DEDUPD_EXTERNAL_SCAN_AFTER=0 "$DEDUPD" reconcile -c "$TB_CONF" >"$TB_DIR/down.txt" \
  2>"$TB_DIR/down.log" || rc=$?
tb_eq "reconcile with shard 1 down exits 1" 1 "$rc"
tb_check "it says shard 1 was not scanned" grep -q '^shard 1 (.*): not scanned: ' "$TB_DIR/down.txt"
tb_eq "shards 0 and 2 were scanned all the same" "0 2" \
  "$(grep -o '^shard [0-9]* (.*): dedup table dedup_record$' "$TB_DIR/down.txt" | cut -d' ' -f2 | paste -sd' ')"
tb_check "the log counts the shard not scanned" grep -q '1 of 3 shard(s) could not be scanned' "$TB_DIR/down.log"
tb_done
