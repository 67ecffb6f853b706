#!/usr/bin/env bash
# 89: a route's dedup table is its own, never a table of dedupd's or of the
# handler's. Refused when the file is loaded, with FILE:LINE, before any
# statement: two routes whose tables differ only in case (one table on a
# server with lower_case_table_names), and a name starting with dedupd_
# (dedupd_schema, dedupd_shard_layout, and those to come). Refused by
# migrate, altering nothing: an existing table that is no dedup table (a
# handler's business table named as the dedup table).
source "$(dirname "$0")/../lib.sh"
tb_init table_names
tb_mock a:1 b:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='k:${id}' tb_config "$TB_DIR/ok.conf"
TB_CONF="$TB_DIR/ok.conf" tb_migrate || tb_die "migrate failed"
schema() { tb_sql 'SELECT table_name, version FROM dedupd_schema ORDER BY table_name'; }
before=$(schema)

route() { # NAME TOPIC TABLE
  printf '  { name = "%s"; topics = ["%s"]; key = "k:${id}"; table = "%s";\n    handler = { path = "%s"; }; }' \
    "$1" "$2" "$3" "$DD_TEST_HANDLER_DIR/th_scripted.so"
}
refused() { # LABEL CONF WANT
  local rc=0
  DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$2" >"$2.log" 2>&1 || rc=$?
  tb_check "$1: migrate fails" test "$rc" -ne 0
  tb_check "$1: the error says why, with the line" grep -qF "$3" "$2.log"
}

TB_CONF="$TB_DIR/case.conf" tb_config_routes "$(route a a dedup_a),
$(route b b DEDUP_A)"
refused "tables equal but for case" "$TB_DIR/case.conf" \
  "case.conf:11: route b: setting table: route a (${TB_DIR}/case.conf:9) has the dedup table dedup_a, the same name but for case"
TB_CONF="$TB_DIR/own.conf" tb_config_routes "$(route a a dedupd_schema)"
refused "dedupd's own table" "$TB_DIR/own.conf" \
  "own.conf:9: route a: setting table: \"dedupd_schema\": names starting with dedupd_ (in any case) are dedupd's own tables"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='k:${id}' \
  TB_DEDUP_EXTRA='table = "Dedupd_Shard_Layout";' tb_config "$TB_DIR/layout.conf"
refused "dedupd's own table, any case, without routes" "$TB_DIR/layout.conf" \
  "setting dedup.table: \"Dedupd_Shard_Layout\": names starting with dedupd_"
tb_eq "dedupd_schema unchanged" "$before" "$(schema)"

tb_sql "CREATE TABLE orders (id INT PRIMARY KEY, total INT) COMMENT = 'the shop''s orders'"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='k:${id}' \
  TB_DEDUP_EXTRA='table = "orders";' tb_config "$TB_DIR/orders.conf"
refused "a business table as the dedup table" "$TB_DIR/orders.conf" \
  "table orders exists and is not a dedup table (it has no biz_key column)"
tb_eq "orders: its columns unchanged" "id total" \
  "$(tb_sql "SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION SEPARATOR ' ') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'")"
tb_eq "orders: its comment unchanged" "the shop's orders" \
  "$(tb_sql "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'")"
tb_eq "orders: not recorded as migrated" "$before" "$(schema)"
tb_done
