#!/usr/bin/env bash
# 60: external mode, the worker killed between act and finish. The example
# notify handler "sends" each message to a store outside dedupd's
# transaction (its own connection), then its fault hook _exit(9)s the
# worker before dedupd can mark the key applied: the key is left
# processing, its send done. After a restart the redelivered message finds
# the key processing, waits for the dead claim's lease (external.lease) to
# run out and takes it over with the next token.
# - With reconcile() the new claim asks the store first, learns the send
#   happened and records the key applied without sending again: every
#   notification exists exactly once.
# - Without reconcile() (notify_noreconcile.so) the takeover sends again:
#   the crashed keys have two sends, one per token (at least once, as
#   docs/GUARANTEES.md says). finish()'s local record is still once per key.
source "$(dirname "$0")/../lib.sh"
tb_init external_crash
tb_mock events:2 other:2
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=2 TB_BATCH_MAX=5
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
external='external = { lease = "2s"; scan_interval = "0"; };'
TB_GROUP=ga TB_TOPIC=events tb_config "$TB_DIR/a.conf" "$external"
tb_migrate || tb_die "migrate failed"
N=40
seq 1 $N | awk '{ printf "%d\t-\t{\"id\":\"a%d\",\"to\":\"u%d\",\"text\":\"hello\"}\n", $1 % 2, $1, $1 }' |
  tb_produce events 2>/dev/null || tb_die "produce failed"

# Run 1 dies right after its 10th send.
rc=0
NOTIFY_CRASH_AFTER_ACT=10 timeout "$(tb_secs 60)" "$DEDUPD" run -c "$TB_DIR/a.conf" \
  >>"$TB_DIR/run1.log" 2>&1 || rc=$?
tb_eq "the fault hook killed the worker (exit 9)" 9 "$rc"
# Keys left processing: the one sent just before the crash, and maybe one
# another lane had claimed and not sent yet.
sent_keys() {
  tb_sql "SELECT COALESCE(GROUP_CONCAT(biz_key ORDER BY biz_key), '') FROM dedup_record d WHERE status = 0
          AND biz_key LIKE '$1' AND $2 EXISTS (SELECT 1 FROM notify_outbox o WHERE o.biz_key = d.biz_key)"
}
crashed=$(sent_keys 'n:a%' '')
unsent=$(sent_keys 'n:a%' NOT)
tb_log "after the crash: processing and sent: $crashed; processing, not sent: ${unsent:-none}"
tb_check "a key is left processing with its send done" test -n "$crashed"
# Run 2: takeover with reconcile().
tb_run || tb_die "run after the crash failed"
tb_eq "every key applied once" "$N 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record WHERE biz_key LIKE 'n:a%'" | tr '\t' ' ')"
tb_eq "every notification exists exactly once" "$N $N" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_outbox WHERE biz_key LIKE 'n:a%'" | tr '\t' ' ')"
tb_eq "finish() recorded every key once" "$N" \
  "$(tb_sql "SELECT COUNT(*) FROM notify_log WHERE biz_key LIKE 'n:a%'")"
tb_eq "the keys sent before the crash were taken over (token 2) and found sent by token 1" \
  "$(tr ',' '\n' <<<"$crashed" | sed 's/$/ 2 1 1/')" \
  "$(tb_sql "SELECT biz_key, fence, JSON_VALUE(response, '\$.fence'), JSON_VALUE(response, '\$.reconciled')
             FROM dedup_record WHERE FIND_IN_SET(biz_key, '$crashed') ORDER BY biz_key" | tr '\t' ' ')"
[[ -z "$unsent" ]] || tb_eq "the keys claimed and not sent were sent by the takeover (token 2)" \
  "$(tr ',' '\n' <<<"$unsent" | sed 's/$/ 2 2/')" \
  "$(tb_sql "SELECT biz_key, fence, JSON_VALUE(response, '\$.fence')
             FROM dedup_record WHERE FIND_IN_SET(biz_key, '$unsent') ORDER BY biz_key" | tr '\t' ' ')"
tb_check "the takeover asked reconcile()" \
  grep -q 'reconcile() says the effect happened' "$TB_DIR/run.log"
tb_assert_committed_at_end ga events

# The same without reconcile(): the takeover sends again.
export TB_HANDLER="$DD_NOTIFY_NORECONCILE_SO" TB_KEY='n:${id}'
TB_GROUP=gb TB_TOPIC=other tb_config "$TB_DIR/b.conf" "$external"
seq 1 $N | awk '{ printf "%d\t-\t{\"id\":\"b%d\",\"to\":\"u%d\",\"text\":\"hello\"}\n", $1 % 2, $1, $1 }' |
  tb_produce other 2>/dev/null || tb_die "produce failed"
rc=0
NOTIFY_CRASH_AFTER_ACT=10 timeout "$(tb_secs 60)" "$DEDUPD" run -c "$TB_DIR/b.conf" \
  >>"$TB_DIR/run1b.log" 2>&1 || rc=$?
tb_eq "the fault hook killed the worker again (exit 9)" 9 "$rc"
crashed=$(sent_keys 'n:b%' '')
tb_check "a key is left processing with its send done" test -n "$crashed"
TB_CONF="$TB_DIR/b.conf" tb_run || tb_die "run after the second crash failed"
tb_eq "every key applied once" "$N 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record WHERE biz_key LIKE 'n:b%'" | tr '\t' ' ')"
tb_eq "every notification exists at least once" "$N" \
  "$(tb_sql "SELECT COUNT(DISTINCT biz_key) FROM notify_outbox WHERE biz_key LIKE 'n:b%'")"
tb_eq "the keys sent before the crash were sent twice, once per token; the others once" \
  "$(tr ',' '\n' <<<"$crashed" | sed 's/$/ 1,2/')" \
  "$(tb_sql "SELECT biz_key, GROUP_CONCAT(fence ORDER BY fence) FROM notify_outbox
             WHERE biz_key LIKE 'n:b%' GROUP BY biz_key HAVING COUNT(*) > 1 ORDER BY biz_key" | tr '\t' ' ')"
tb_eq "finish() recorded every key once" "$N" \
  "$(tb_sql "SELECT COUNT(*) FROM notify_log WHERE biz_key LIKE 'n:b%'")"
tb_check "the takeover said it acts again" \
  grep -q 'no reconcile(): acting again' "$TB_DIR/run.log"
tb_assert_committed_at_end gb other
tb_done
