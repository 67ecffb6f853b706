# shellcheck shell=bash
# Helpers of the positions tests, sourced after lib.sh:
# source "$(dirname "$0")/positions.sh".
#
#   pos_bed NAME                     tb_init NAME, a mock cluster with topic
#                                    payments:1, the configuration, migrate
#   pos_old_topic                    pos_bed's topic: five payments (old0..4)
#                                    applied, the database's position 5
#   pos_payments PREFIX FROM COUNT   COUNT payments for partition 0 (tb_produce's
#                                    input), orders PREFIX<FROM> on
#   pos_row [GROUP]                  "next_offset check_offset" of GROUP's row
#                                    (TB_GROUP, tg) for TB_TOPIC [0]
#   pos_topic_created_again TOPIC:PARTS...   the topic deleted and created
#                                    again: the mock cluster stopped and a fresh
#                                    one started under the same names (Kafka
#                                    deletes a deleted topic's committed offsets
#                                    with it; the fresh cluster has none), and
#                                    TB_CONF written again for it (tb_config)

pos_bed() {
  tb_init "$1"
  tb_mock payments:1
  TB_KAFKA_PROPS=auto.commit.interval.ms=200
  tb_config
  tb_migrate || tb_die "migrate failed"
}

pos_old_topic() {
  pos_payments old 0 5 | tb_produce 2>/dev/null || tb_die "produce failed"
  tb_run || tb_die "the run on the old topic failed"
  tb_eq "the old topic's five payments applied" 5 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
  tb_check "the position is 5, checked by a message below it" grep -Eq '^5 [0-4]$' \
    <<<"$(pos_row)"
}

pos_payments() {
  local i
  for ((i = $2; i < $2 + $3; i++)); do
    printf '0\t-\t{"merchant_id":"m1","order_no":"%s%d","amount":1.25,"txn_id":"T%s%d","currency":"CNY","status":"PAID"}\n' \
      "$1" "$i" "$1" "$i"
  done
}

pos_row() {
  tb_sql "SELECT next_offset, IFNULL(check_offset, 'none') FROM dedupd_position
          WHERE group_id = '${1:-${TB_GROUP:-tg}}' AND topic = '$TB_TOPIC' AND kpartition = 0" |
    tr '\t' ' '
}

pos_topic_created_again() {
  tb_stop "$TB_MOCK_PID" || true
  tb_mock "$@"
  tb_config
}
