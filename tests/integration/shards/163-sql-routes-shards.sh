#!/usr/bin/env bash
# 163: the SQL handler under routes and shards: two routes, each its own
# handler.sql (a ledger of payments sharded by merchant, an order state
# machine sharded by order), over two database shards, the handler going
# one message at a time within its batches (DEDUPD_TEST_FAULTS=no_bulk:
# as on a server without bulk execution). migrate makes each route's
# tables in each shard; every payment is booked once in its merchant's
# shard with exact balances; every order is paid once in its own shard, a
# second payment of it rejected and rolled back; dead letters by route.
source "$(dirname "$0")/../lib.sh"
tb_init sql_routes_shards
tb_shards 2
tb_mock payments:2 orders:2
cat >"$TB_DIR/pay.grants.sql" <<'EOF'
GRANT INSERT ON `x`.`entry` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `x`.`balance` TO 'dedupd'@'%';
EOF
cat >"$TB_DIR/orders.grants.sql" <<'EOF'
GRANT SELECT, UPDATE ON `x`.`shop_order` TO 'dedupd'@'%';
GRANT INSERT ON `x`.`order_payment` TO 'dedupd'@'%';
EOF
export TB_HANDLER_GRANTS="$TB_DIR/pay.grants.sql $TB_DIR/orders.grants.sql"
tb_config_routes '
{ name = "pay"; topics = ["payments"]; key = "pay:${merchant_id}:${order_no}";
  lane_key = "${merchant_id}"; shard_key = "${merchant_id}"; table = "dedup_pay";
  handler = { sql = {
    migrate = (
      "CREATE TABLE IF NOT EXISTS entry (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
      " merchant_id VARCHAR(64) NOT NULL, amount DECIMAL(38,2) NOT NULL CHECK (amount > 0),"
      " biz_key VARBINARY(255) NOT NULL)",
      "CREATE TABLE IF NOT EXISTS balance (merchant_id VARCHAR(64) PRIMARY KEY,"
      " balance DECIMAL(38,2) NOT NULL, entries BIGINT NOT NULL)");
    statements = (
      { name = "entry"; sql = "INSERT INTO entry (merchant_id, amount, biz_key)"
        " VALUES (${merchant_id}, ${amount}, ${@key})"; },
      { name = "balance"; sql = "INSERT INTO balance VALUES (${merchant_id}, ${amount}, 1)"
        " ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), entries = entries + 1"; });
  }; }; },
{ name = "orders"; topics = ["orders"]; key = "paid:${order_no}:${txn_id}";
  lane_key = "${order_no}"; shard_key = "${order_no}"; table = "dedup_orders";
  handler = { sql = {
    migrate = (
      "CREATE TABLE IF NOT EXISTS shop_order (order_no VARCHAR(64) PRIMARY KEY,"
      " status VARCHAR(16) NOT NULL, paid_txn VARCHAR(64) NULL)",
      "CREATE TABLE IF NOT EXISTS order_payment (txn_id VARCHAR(64) PRIMARY KEY,"
      " order_no VARCHAR(64) NOT NULL)");
    statements = (
      { name = "paid"; sql = "UPDATE shop_order SET status = '"'"'PAID'"'"', paid_txn = ${txn_id}"
        " WHERE order_no = ${order_no} AND status = '"'"'UNPAID'"'"'"; expect = 1; },
      { name = "payment"; sql = "INSERT INTO order_payment VALUES (${txn_id}, ${order_no})"; });
  }; }; }'
tb_migrate || tb_die "migrate failed"
for k in 0 1; do
  tb_eq "shard $k: each route's tables" "balance entry order_payment shop_order" \
    "$(tb_shard_sql "$k" "SHOW TABLES" | grep -Ev '^(dedup|dedupd)_' | sort | paste -sd' ')"
  # the orders, each in the shard of its order_no
  tb_shard_sql "$k" "INSERT INTO shop_order (order_no, status)
    SELECT CONCAT('o', seq), 'UNPAID' FROM seq_0_to_39 WHERE CRC32(CONCAT('o', seq)) % 2 = $k"
done

tb_gen --keys 300 --dup-min 1 --dup-max 3 --partitions 2 --merchants 8 --conflicts 5 --seed 163
tb_produce payments <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce payments failed"
# 40 orders, each paid by t<N>; a copy of each payment; orders 0-9 paid
# again by another transaction (rejected: not UNPAID any more)
python3 -c '
for n in range(40):
    print("%d\t-\t{\"order_no\":\"o%d\",\"txn_id\":\"t%d\"}" % (n % 2, n, n))
for n in range(40):
    print("%d\t-\t{\"order_no\":\"o%d\",\"txn_id\":\"t%d\"}" % (n % 2, n, n))
for n in range(10):
    print("%d\t-\t{\"order_no\":\"o%d\",\"txn_id\":\"x%d\"}" % (n % 2, n, n))' |
  tb_produce orders 2>/dev/null || tb_die "produce orders failed"

DEDUPD_TEST_FAULTS=no_bulk tb_run || tb_die "dedupd run failed"

want=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
for m in sorted(e["merchants"]):
    c = e["merchants"][m]["balance_cents"]
    print("%s\t%d.%02d\t%d" % (m, c // 100, c % 100, e["merchants"][m]["entries"]))' \
  "$TB_DIR/expect.json")
tb_eq "pay: every merchant's balance exact, all shards" "$want" \
  "$(tb_shards_sql 'SELECT merchant_id, balance, entries FROM balance' | sort)"
tb_eq "pay: one entry per payment, all shards" "$(tb_expect_get unique_keys_applied)" \
  "$(tb_shards_sql 'SELECT COUNT(*) FROM entry' | awk '{ s += $1 } END { print s }')"
tb_eq "pay: no payment booked twice" "" \
  "$(tb_shards_sql 'SELECT biz_key FROM entry' | sort | uniq -d | head -n 3)"
tb_eq "pay: conflicts dead-lettered" "$(tb_expect_get dead_letters.conflict)" \
  "$(tb_dlq_count conflict payments.dlq)"
tb_eq "orders: 40 paid, each by its first payment" 40 \
  "$(tb_shards_sql "SELECT COUNT(*) FROM shop_order WHERE status = 'PAID'
                    AND paid_txn = CONCAT('t', SUBSTRING(order_no, 2))" | awk '{ s += $1 } END { print s }')"
tb_eq "orders: one payment row each, the second payments rolled back" "40 0" \
  "$(tb_shards_sql "SELECT COUNT(*), SUM(txn_id LIKE 'x%') FROM order_payment" |
    awk '{ n += $1; x += $2 } END { print n, x }')"
tb_eq "orders: the second payments dead-lettered rejected" "rejected 10" \
  "$(tb_dlq_reasons orders.dlq)"
for k in 0 1; do
  tb_eq "shard $k: rows where the routing puts them" "0 0 0" \
    "$(tb_shard_sql "$k" "SELECT (SELECT COUNT(*) FROM entry WHERE CRC32(merchant_id) % 2 <> $k),
      (SELECT COUNT(*) FROM order_payment WHERE CRC32(order_no) % 2 <> $k),
      (SELECT COUNT(*) FROM dedup_orders WHERE CRC32(SUBSTRING_INDEX(SUBSTRING_INDEX(biz_key, ':', 2), ':', -1)) % 2 <> $k)" |
      tr '\t' ' ')"
  tb_check "shard $k holds applied payments and orders" test \
    "$(tb_shard_sql "$k" "SELECT LEAST((SELECT COUNT(*) FROM entry), (SELECT COUNT(*) FROM order_payment))")" -gt 0
done
tb_assert_committed_at_end tg payments
tb_assert_committed_at_end tg orders
tb_done
