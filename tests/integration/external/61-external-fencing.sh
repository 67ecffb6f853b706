#!/usr/bin/env bash
# 61: external mode, a takeover racing a slow original worker.
# 1. Worker A (group ga) sends, then its act() sleeps 8 s (a slow reply);
#    its lease (2 s) is not renewed and A does not notice losing it
#    (DEDUPD_TEST_FAULTS=lease_blind: a worker paused past its lease, as a
#    GC pause or a frozen VM would leave it). Worker B (group gb) finds the
#    lease over, takes the key over (token 2), asks reconcile() (the send is
#    there) and records it applied. When A's act() returns, A's finish finds
#    the row carrying token 2 and changes nothing: the row keeps B's token
#    and response, A logs it and counts its copy as a duplicate. One send,
#    one finish() record.
# 2. Without faults, a worker whose act() sleeps 6 s keeps its claim: its
#    lease is renewed every third of it, so worker D (group gd) waits and
#    never takes it over, and finds the key applied (token 1) afterwards.
#    Meanwhile D applies the other keys of the same partition that came
#    after it: a waiting message does not hold them up. Worker E (group ge)
#    may have one message in flight (batch.max_inflight = 1): the waiting
#    message fills it, E stops polling, and still gets through the stream
#    once C's claim ends: waiting cannot deadlock the backpressure.
# 3. Without faults, worker F (group gf) is paused (SIGSTOP) in its act()
#    past its lease; worker G (group gg) takes the key over (token 2) and
#    records it applied. When F resumes, its finish goes to the database,
#    finds token 2 and changes nothing, and its warning names both tokens:
#    it does not blame a database that answered every renewal.
source "$(dirname "$0")/../lib.sh"
tb_init external_fencing
tb_mock t1:1 t2:1 t3:1
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=1
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
external='external = { lease = "2s"; scan_interval = "0"; };'
retry='retry = { backoff_initial = "100ms"; backoff_max = "500ms"; };'
for g in ga gb; do TB_GROUP=$g TB_TOPIC=t1 tb_config "$TB_DIR/$g.conf" "$external" "$retry"; done
for g in gc gd; do TB_GROUP=$g TB_TOPIC=t2 tb_config "$TB_DIR/$g.conf" "$external" "$retry"; done
for g in gf gg; do TB_GROUP=$g TB_TOPIC=t3 tb_config "$TB_DIR/$g.conf" "$external" "$retry"; done
TB_GROUP=ge TB_TOPIC=t2 TB_BATCH_MAX=1 TB_BATCH_EXTRA='max_inflight = 1;' \
  tb_config "$TB_DIR/ge.conf" "$external" "$retry"
tb_migrate || tb_die "migrate failed"
row() { tb_sql "SELECT status, fence, JSON_VALUE(response, '\$.fence'), COALESCE(JSON_VALUE(response, '\$.reconciled'), '-') FROM dedup_record WHERE biz_key = '$1'" | tr '\t' ' '; }
row_is() { test "$(row "$1")" = "$2"; }
log_has() { grep -q "$2" "$TB_DIR/$1.log"; }
sends_are() { test "$(tb_sql "SELECT COUNT(*) FROM notify_outbox WHERE biz_key = '$1'")" = "$2"; }
committed_is() { test "$(tb_committed "$1" "$2")" = "$3"; }

# 1. The stale finish.
tb_bg ga env DEDUPD_TEST_FAULTS=lease_blind NOTIFY_ACT_SLEEP_MS=8000 "$DEDUPD" run -c "$TB_DIR/ga.conf"
ga=$TB_LAST_PID
tb_wait_until 30 "ga assigned" log_has ga "Assigned t1 " || tb_die "ga got no partition"
printf '0\t-\t{"id":"f1","to":"u1"}\n' | tb_produce t1 2>/dev/null || tb_die "produce failed"
tb_check "A claims the key and sends" tb_wait_until 20 "A's send" sends_are n:f1 1
tb_bg gb "$DEDUPD" run -c "$TB_DIR/gb.conf"
gb=$TB_LAST_PID
tb_check "B takes the key over and records it applied under token 2" \
  tb_wait_until 30 "B's finish" row_is n:f1 "1 2 1 1"
tb_check "A's finish comes later and finishes nothing" \
  tb_wait_until 30 "A's stale finish" log_has ga "Finished nothing"
tb_eq "the row keeps B's token and response" "1 2 1 1" "$(row n:f1)"
tb_check "A names both tokens" \
  grep -q "claim of this key (token 1) was taken over before its finish; the row carries token 2" "$TB_DIR/ga.log"
tb_eq "one send, one finish() record" "1 1" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM notify_outbox WHERE biz_key = 'n:f1'), (SELECT COUNT(*) FROM notify_log WHERE biz_key = 'n:f1')" | tr '\t' ' ')"
tb_check "A moves past its copy (a duplicate now)" tb_wait_until 20 "ga committed" \
  committed_is ga t1 "0 1"
tb_check "B committed its copy" tb_wait_until 20 "gb committed" committed_is gb t1 "0 1"
rca=0 rcb=0
tb_stop "$ga" || rca=$?
tb_stop "$gb" || rcb=$?
tb_eq "A and B stop cleanly" "0 0" "$rca $rcb"
tb_eq "A counted its copy a duplicate" 1 "$(tb_summary_sum duplicates "$TB_DIR/ga.log")"

# 2. Renewals keep a slow worker's claim; other keys keep flowing.
tb_bg gc env NOTIFY_ACT_SLEEP_MS=6000 "$DEDUPD" run -c "$TB_DIR/gc.conf"
gc=$TB_LAST_PID
tb_bg gd "$DEDUPD" run -c "$TB_DIR/gd.conf"
gd=$TB_LAST_PID
tb_bg ge "$DEDUPD" run -c "$TB_DIR/ge.conf"
ge=$TB_LAST_PID
for g in gc gd ge; do
  tb_wait_until 30 "$g assigned" log_has $g "Assigned t2 " || tb_die "$g got no partition"
done
kill -STOP "$gd" "$ge" # C claims f2 first
printf '0\t-\t{"id":"f2","to":"u2"}\n' | tb_produce t2 2>/dev/null || tb_die "produce failed"
tb_check "C claims f2 and sends" tb_wait_until 20 "C's send" sends_are n:f2 1
kill -CONT "$gd" "$ge"
printf '0\t-\t{"id":"g%d"}\n' 1 2 3 4 5 | tb_produce t2 2>/dev/null || tb_die "produce failed"
applied_g() { test "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'n:g%' AND status = 1")" = 5; }
tb_check "the keys after f2 in its partition are applied while f2 is in act()" \
  tb_wait_until 20 "g1..g5 applied" applied_g
tb_eq "f2 is still processing under token 1 then" "0 1" \
  "$(tb_sql "SELECT status, fence FROM dedup_record WHERE biz_key = 'n:f2'" | tr '\t' ' ')"
tb_check "D waited for f2" log_has gd "this message waits"
tb_check "f2 applied by C under token 1" tb_wait_until 30 "C's finish" row_is n:f2 "1 1 1 -"
tb_check "C committed f2 and the rest" tb_wait_until 20 "gc committed" committed_is gc t2 "0 6"
tb_check "D committed f2 and the rest" tb_wait_until 20 "gd committed" committed_is gd t2 "0 6"
tb_check "E, one message in flight at most, got through too" \
  tb_wait_until 20 "ge committed" committed_is ge t2 "0 6"
tb_check "E waited for f2" log_has ge "this message waits"
tb_check "E's waiting message held it at its limit (it paused)" log_has ge "pausing consumption"
rcc=0 rcd=0 rce=0
tb_stop "$gc" || rcc=$?
tb_stop "$gd" || rcd=$?
tb_stop "$ge" || rce=$?
tb_eq "C, D and E stop cleanly" "0 0 0" "$rcc $rcd $rce"
tb_eq "E applied or skipped every message once" 6 \
  "$(($(tb_summary_sum applied "$TB_DIR/ge.log") + $(tb_summary_sum duplicates "$TB_DIR/ge.log")))"
tb_check "D never took f2 over" bash -c "! grep -q 'Took the key over' '$TB_DIR/gd.log'"
tb_eq "f2 sent once" 1 "$(tb_sql "SELECT COUNT(*) FROM notify_outbox WHERE biz_key = 'n:f2'")"
tb_eq "every key applied once, sent once" "6 6" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_record WHERE biz_key REGEXP '^n:[fg][0-9]\$' AND biz_key NOT IN ('n:f1', 'n:f3') AND status = 1),
                    (SELECT COUNT(*) FROM notify_outbox WHERE biz_key NOT IN ('n:f1', 'n:f3'))" | tr '\t' ' ')"

# 3. A worker paused past its lease, for real.
tb_bg gf env NOTIFY_ACT_SLEEP_MS=3000 "$DEDUPD" run -c "$TB_DIR/gf.conf"
gf=$TB_LAST_PID
tb_wait_until 30 "gf assigned" log_has gf "Assigned t3 " || tb_die "gf got no partition"
printf '0\t-\t{"id":"f3","to":"u3"}\n' | tb_produce t3 2>/dev/null || tb_die "produce failed"
tb_check "F claims f3 and sends" tb_wait_until 20 "F's send" sends_are n:f3 1
kill -STOP "$gf"
tb_bg gg "$DEDUPD" run -c "$TB_DIR/gg.conf"
gg=$TB_LAST_PID
tb_check "G takes f3 over and records it applied under token 2" \
  tb_wait_until 30 "G's finish" row_is n:f3 "1 2 1 1"
kill -CONT "$gf"
tb_check "F's finish comes later and finishes nothing" \
  tb_wait_until 30 "F's stale finish" log_has gf "Finished nothing"
tb_check "F names both tokens" \
  grep -q "claim of this key (token 1) was taken over before its finish; the row carries token 2" "$TB_DIR/gf.log"
tb_check "F does not blame the database" bash -c "! grep -q 'database did not answer' '$TB_DIR/gf.log'"
tb_eq "the row keeps G's token and response" "1 2 1 1" "$(row n:f3)"
tb_eq "f3 sent once" 1 "$(tb_sql "SELECT COUNT(*) FROM notify_outbox WHERE biz_key = 'n:f3'")"
tb_check "F moves past its copy" tb_wait_until 20 "gf committed" committed_is gf t3 "0 1"
rcf=0 rcg=0
tb_stop "$gf" || rcf=$?
tb_stop "$gg" || rcg=$?
tb_eq "F and G stop cleanly" "0 0" "$rcf $rcg"
tb_done
