#!/usr/bin/env bash
# 164: the SQL handler's examples (examples/sql/) run as written, each with
# the command its first lines give: `dedupd handler-test` on its
# configuration, its messages and (the ones working on existing rows) its
# seed rows, here on the test bed's server. Each passes (both passes leave
# the same rows), and leaves what it is an example of:
#   - ledger: entries and balances exact, the non-positive and the
#     incomplete payment rejected;
#   - orders: each order paid once with an event order.paid, a second
#     payment, one of another amount and one of a cancelled order rejected;
#   - coupon: the stock taken while enough is left, the grant past it and
#     the one of an unknown coupon rejected;
#   - version: the edits made from the current version applied, the stale
#     one rejected.
source "$(dirname "$0")/../lib.sh"
tb_init sql_examples
EX="$DD_TEST_SRC_DIR/examples/sql"

# The command of each example's header, run in the examples' directory,
# the four at once.
declare -A pids
for e in ledger orders coupon version; do
  c=$(grep -m 1 -o 'dedupd handler-test -c .*' "$EX/$e.conf") || tb_die "$e.conf gives no command"
  read -r -a args <<<"${c#dedupd }"
  (cd "$EX" && exec timeout --foreground "$(tb_secs 120)" "$DEDUPD" "${args[@]}" \
    --mysql-socket "$DD_TEST_MYSQL_SOCKET") >"$TB_DIR/$e.out" 2>"$TB_DIR/$e.log" &
  pids[$e]=$!
done
for e in ledger orders coupon version; do
  rc=0
  wait "${pids[$e]}" || rc=$?
  tb_eq "$e: handler-test passes" "0 handler-test: PASS" "$rc $(tail -n 1 "$TB_DIR/$e.out")"
  ((rc == 0)) || { sed 's/^/#   /' "$TB_DIR/$e.out"; tail -n 5 "$TB_DIR/$e.log" | sed 's/^/#   /'; }
done

# shown NAME TEXT: handler-test's output for example NAME has TEXT (its
# tables are printed with their rows, tab-separated, indented).
shown() { grep -qF -- "$2" "$TB_DIR/$1.out"; }
tab=$'\t'
tb_check "ledger: m1's balance of its two payments" shown ledger "m1${tab}EUR${tab}19.75${tab}2"
tb_check "ledger: a 17-digit amount, exact" shown ledger "m2${tab}USD${tab}99999999999999999.99${tab}1"
tb_check "ledger: 3 applied, 2 rejected" shown ledger \
  "pass 1: each message once, in file order: 6 delivered, 3 applied, 1 duplicate(s), 2 dead letter(s) rejected=2"
tb_check "orders: o1 paid by t1, o2 by t4, o3 still cancelled" bash -c \
  "grep -qF 'o1${tab}25.00${tab}PAID${tab}t1' '$TB_DIR/orders.out' &&
   grep -qF 'o2${tab}9.90${tab}PAID${tab}t4' '$TB_DIR/orders.out' &&
   grep -qF 'o3${tab}5.00${tab}CANCELLED${tab}NULL' '$TB_DIR/orders.out'"
tb_check "orders: an event per paid order" shown orders \
  "ok   table dedupd_outbox (ignoring id, created): the same 2 row(s) after both passes"
tb_check "orders: the second payment, the wrong amount and the cancelled order rejected" shown orders \
  "3 dead letter(s) rejected=3"
tb_check "coupon: the stock taken to 0" shown coupon "WELCOME10${tab}0"
tb_check "coupon: g1 and g2 granted, g3 and g4 rejected" bash -c \
  "grep -qF 'g2${tab}u2${tab}WELCOME10${tab}2' '$TB_DIR/coupon.out' &&
   grep -qF '2 dead letter(s) rejected=2' '$TB_DIR/coupon.out'"
tb_check "version: d1 at version 3, the stale edit rejected" bash -c \
  "grep -qF 'd1${tab}3${tab}final' '$TB_DIR/version.out' &&
   grep -qF '1 dead letter(s) rejected=1' '$TB_DIR/version.out'"
tb_done
