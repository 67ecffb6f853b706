#!/usr/bin/env bash
# 109: a handler's privileges told before traffic. With handler.grants
# naming the handler's GRANT file, `dedupd check` fails naming the missing
# privilege (and the file's line), and `dedupd run` refuses to start
# without consuming anything; with the grant back both pass. Without the
# declaration, a handler refused a privilege at run time retries at warn,
# rate-limited, not at info. `handler-test --seed-sql FILE` runs the file
# in each pass's database before its messages: the coupon example redeems
# coupons the file granted.
source "$(dirname "$0")/../lib.sh"
tb_init handler_privileges
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
cat >"$TB_DIR/th-grants.sql" <<'SQL'
-- what th_scripted's statements do (the database is read as mysql.database)
GRANT SELECT, INSERT, UPDATE ON `anydb`.`th_effect` TO 'dedupd'@'%';
SQL
export TB_HANDLER_EXTRA='grants = "th-grants.sql";'
tb_config "$TB_CONF" 'retry = { backoff_initial = "20ms"; backoff_max = "20ms"; max_attempts = 12; };'
tb_migrate || tb_die "migrate failed"
printf '0\t-\t{"id":"%d"}\n' 1 2 3 | tb_produce 2>/dev/null || tb_die "produce failed"

tb_sql "REVOKE INSERT ON \`$TB_DB\`.th_effect FROM '$TB_RT_USER'@'%'"
rc=0
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check1.out" 2>&1 || rc=$?
tb_eq "check fails without the handler's INSERT" 1 "$rc"
tb_check "... naming the privilege, the table and the file's line" \
  grep -q "^FAIL handler privileges: the database user $TB_RT_USER lacks INSERT on $TB_DB.th_effect, which the handler needs (declared in handler.grants, $TB_DIR/th-grants.sql:2)" "$TB_DIR/check1.out"
rc=0
tb_run || rc=$?
tb_eq "run refuses to start" 1 "$rc"
tb_check "... saying why" grep -q "lacks INSERT on $TB_DB.th_effect" "$TB_DIR/run.log"
tb_eq "... having consumed nothing" "" "$(tb_committed | awk '$2 > 0')"
tb_eq "no effect" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"

tb_sql "GRANT INSERT ON \`$TB_DB\`.th_effect TO '$TB_RT_USER'@'%'"
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check2.out" 2>&1 || tb_not_ok "check fails with the grant: $(grep FAIL "$TB_DIR/check2.out")"
tb_check "with the grant, check says the handler's privileges are held" \
  grep -q "^ok   handler privileges: $TB_RT_USER holds those $TB_DIR/th-grants.sql declares" "$TB_DIR/check2.out"
tb_run || tb_die "run with the grant failed"
tb_eq "every message applied" 3 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"

# Undeclared, refused at run time: the retries are warnings, rate-limited.
export TB_HANDLER_EXTRA=''
tb_config "$TB_CONF" 'retry = { backoff_initial = "20ms"; backoff_max = "20ms"; max_attempts = 12; };'
tb_sql "REVOKE INSERT ON \`$TB_DB\`.th_effect FROM '$TB_RT_USER'@'%'"
printf '0\t-\t{"id":"%d"}\n' 4 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run without the grant failed"
tb_eq "the message is dead-lettered after its retries" 1 "$(tb_dlq_count retries_exhausted)"
warns=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" | grep -c 'level=warn.*refused it a privilege' || true)
tb_eq "the refusals are warnings, at most 5 a minute for 12 attempts" 5 "$warns"
tb_eq "no refused retry at info" 0 \
  "$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" | grep 'level=info' | grep -c 'command denied' || true)"
tb_sql "GRANT INSERT ON \`$TB_DB\`.th_effect TO '$TB_RT_USER'@'%'"

# handler-test --seed-sql: redeem events of coupons the seed granted.
printf '%s\n' '{"event_id": "r1", "event": "redeemed", "code": "S1", "order_no": "o1"}' \
  '{"event_id": "r2", "event": "redeemed", "code": "S2", "order_no": "o2"}' >"$TB_DIR/redeem.jsonl"
cat >"$TB_DIR/seed.sql" <<'SQL'
INSERT INTO coupon (code, user_id, amount_cents, status) VALUES ('S1', 'u1', 500, 'NEW');
INSERT INTO coupon (code, user_id, amount_cents, status) VALUES ('S2', 'u2', 700, 'NEW');
SQL
HANDLERS=$(dirname "$DD_LEDGER_SO")
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" -c "$DD_TEST_SRC_DIR/examples/coupon/dedupd.conf" \
  --handler "$HANDLERS/coupon.so" --seed-sql "$TB_DIR/seed.sql" "$TB_DIR/redeem.jsonl" \
  >"$TB_DIR/seed.out" 2>"$TB_DIR/seed.log" || rc=$?
sed 's/^/#   /' "$TB_DIR/seed.out"
tb_eq "handler-test with --seed-sql passes" 0 "$rc"
tb_check "... both seeded coupons redeemed in both passes" \
  grep -q '^ok   table coupon: the same 2 row(s) after both passes' "$TB_DIR/seed.out"
tb_eq "... redeemed for their orders" 2 "$(grep -cE 'S[12].*REDEEMED.*o[12]' "$TB_DIR/seed.out")"
echo 'INSERT INTO no_such_table VALUES (1);' >"$TB_DIR/bad-seed.sql"
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" -c "$DD_TEST_SRC_DIR/examples/coupon/dedupd.conf" \
  --handler "$HANDLERS/coupon.so" --seed-sql "$TB_DIR/bad-seed.sql" "$TB_DIR/redeem.jsonl" \
  >/dev/null 2>"$TB_DIR/bad-seed.log" || rc=$?
tb_eq "a seed that fails stops handler-test" 1 "$rc"
tb_check "... naming the file and statement" grep -q -- "--seed-sql $TB_DIR/bad-seed.sql: statement 1: 1146" "$TB_DIR/bad-seed.log"
tb_done
