#!/usr/bin/env bash
# 62: external mode, the database's clock decides every lease, whatever the
# worker's clock says. The test's private MariaDB runs under libfaketime
# (Debian package faketime) an hour behind the worker's clock, then an hour
# ahead of it; dedupd runs on the real clock.
# 1. Its clock an hour ahead of the database's, a worker must not take over
#    a lease that runs 12 s more on the database's clock: its message waits,
#    the row keeps its token and owner, while a new key after it in the
#    partition is applied.
# 2. An hour behind, a worker must take over at once a lease that ran out on
#    the database's clock.
# 3. An hour behind, a worker whose own lease ran out (renewals off:
#    DEDUPD_TEST_FAULTS=lease_no_renew, act() 4 s, lease 2 s) must not keep
#    it: it does not finish under its old token, claims again (token 2),
#    and learns from reconcile() that its send happened.
source "$(dirname "$0")/../lib.sh"
tb_init external_clock
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[[ -r $FAKETIME_LIB ]] ||
  tb_die "$FAKETIME_LIB is missing: install the Debian package faketime (scripts/install-deps)"
# The database's clock OFFSET from the real one (the monotonic clock stays).
skew_db() { LD_PRELOAD="$FAKETIME_LIB" FAKETIME="$1" FAKETIME_DONT_FAKE_MONOTONIC=1 "${@:2}"; }
db_minus_worker() { # minutes
  tb_sql "SELECT ROUND(TIMESTAMPDIFF(SECOND, FROM_UNIXTIME($(date +%s)), NOW()) / 60)"
}
skew_db -1h tb_private_db
tb_mock ck:1
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=1
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
for g in ahead behind behind2; do
  TB_GROUP=$g tb_config "$TB_DIR/$g.conf" 'external = { lease = "2s"; scan_interval = "0"; };' \
    'retry = { backoff_initial = "100ms"; backoff_max = "500ms"; };'
done
tb_migrate || tb_die "migrate failed"

# row KEY: "status fence owner", the owner "other" for the claims below.
row() {
  tb_sql "SELECT status, fence, IF(owner LIKE 'other:%', 'other', 'worker')
          FROM dedup_record WHERE biz_key = '$1'" | tr '\t' ' '
}
row_is() { test "$(row "$1")" = "$2"; }
log_has() { grep -q "$2" "$TB_DIR/$1.log"; }
# Claims of another instance: c1's lease runs 12 s more, c2's ran out 1 s ago.
claim_row() {
  tb_sql "INSERT INTO dedup_record (biz_key, request_hash, status, owner, lease_until, fence, topic,
          kpartition, koffset, expire_at) VALUES ('n:$1', UNHEX(SHA2('{\"id\":\"$1\"}', 256)), 0,
          'other:$2', NOW(6) + INTERVAL $3 SECOND, $2, 'ck', 0, 0, NOW(6) + INTERVAL 1 DAY)"
}
# 1. The worker an hour ahead of the database.
tb_eq "the database's clock is an hour behind the worker's" -60 "$(db_minus_worker)"
claim_row c1 5 12
printf '0\t-\t{"id":"%s"}\n' c1 c3 | tb_produce ck 2>/dev/null || tb_die "produce failed"
tb_bg ahead "$DEDUPD" run -c "$TB_DIR/ahead.conf"
pid=$TB_LAST_PID
tb_check "c3, after c1 in the partition, is applied" tb_wait_until 30 "c3" row_is n:c3 "1 1 worker"
tb_check "c1 waits for the lease of other:5" log_has ahead 'key="n:c1" msg="Key in progress'
sleep 2
tb_eq "c1 is not taken over: token 5 of other:5" "0 5 other" "$(row n:c1)"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "the worker stops cleanly" 0 "$rc"

# 2. The worker an hour behind the database.
dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
skew_db +1h tb_private_db_restart
tb_eq "the database's clock is an hour ahead of the worker's" 60 "$(db_minus_worker)"
claim_row c2 7 -1
printf '0\t-\t{"id":"c2"}\n' | tb_produce ck 2>/dev/null || tb_die "produce failed"
tb_bg behind "$DEDUPD" run -c "$TB_DIR/behind.conf"
pid=$TB_LAST_PID
tb_check "c2, whose lease ran out 1 s ago, is taken over (token 8) and applied" \
  tb_wait_until 20 "c2" row_is n:c2 "1 8 worker"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "the worker stops cleanly" 0 "$rc"

# 3. The worker an hour behind, its own lease not renewed.
printf '0\t-\t{"id":"c4"}\n' | tb_produce ck 2>/dev/null || tb_die "produce failed"
tb_bg behind2 env DEDUPD_TEST_FAULTS=lease_no_renew NOTIFY_ACT_SLEEP_MS=4000 \
  "$DEDUPD" run -c "$TB_DIR/behind2.conf"
pid=$TB_LAST_PID
tb_check "c4 is applied under token 2" tb_wait_until 40 "c4" row_is n:c4 "1 2 worker"
tb_check "the worker did not finish under its expired token" \
  log_has behind2 'key="n:c4" msg="Lost the claim of this key (token 1) before finishing: the lease ran out before its renewal was due or done, with no renewal failing'
tb_check "its claim again asked reconcile(), which found the send" \
  log_has behind2 'key="n:c4" msg="reconcile() says the effect happened'
tb_eq "c4 sent once, under token 1" "1" \
  "$(tb_sql "SELECT GROUP_CONCAT(fence) FROM notify_outbox WHERE biz_key = 'n:c4'")"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "the worker stops cleanly" 0 "$rc"
tb_eq "every message committed" "0 4" "$(tb_committed behind2 ck)"
tb_done
