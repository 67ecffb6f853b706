#!/usr/bin/env bash
# 36: the examples build against the installed SDK, each with its own
# meson.build, and run. `meson install --destdir` of this build gives the
# SDK (dedupd, handler.h, dedupd.pc, the examples' sources); each example
# is copied from <datadir>/dedupd/examples, set up with meson finding dedupd
# through pkg-config, built, and run by the installed dedupd on the test
# bed with its own grants file (examples/*/grants.sql; the ledger's are in
# sql/grants.sql) and its messages.jsonl.
# End state: minimal: the three signups, the one without an email
# dead-lettered; coupon: C1 redeemed by o1 only (o2's redemption applied as
# refused, logged through host->log with the message's fields), C3
# redeemed, C2 new, C4 rejected; ledger: the balances and entries of its
# four payments, the negative one rejected; every topic committed at its
# end; an example installed with meson lands in dedupd.pc's handlerdir.
source "$(dirname "$0")/../lib.sh"
tb_init sdk_examples
BUILD=$(dirname "$DEDUPD")
SDK="$TB_DIR/sdk"
meson install -C "$BUILD" --destdir "$SDK" --no-rebuild --quiet >"$TB_DIR/install.log" 2>&1 ||
  tb_die "meson install --destdir failed (see install.log)"
PC=$(dirname "$(find "$SDK" -name dedupd.pc | head -n 1)")
export PKG_CONFIG_PATH="$PC"
DEDUPD=$(find "$SDK" -path '*/bin/dedupd' | head -n 1)
EXAMPLES=$(pkg-config --variable=exampledir dedupd)
tb_log "SDK in $SDK: dedupd.pc in $PC, examples in $EXAMPLES"

tb_mock signups:1 coupons:1 payments:2
for ex in minimal coupon ledger; do
  cp -r "$EXAMPLES/$ex" "$TB_DIR/$ex"
  (cd "$TB_DIR/$ex" && meson setup build && meson compile -C build) >"$TB_DIR/build-$ex.log" 2>&1 ||
    tb_die "the $ex example does not build against the installed SDK (see build-$ex.log)"
  tb_ok "the $ex example builds with its meson.build against the installed SDK"
done
(cd "$TB_DIR/minimal" && meson install -C build) >>"$TB_DIR/build-minimal.log" 2>&1 ||
  tb_die "meson install of the minimal example failed"
tb_check "an installed example lands in dedupd.pc's handlerdir" \
  test -f "$(pkg-config --variable=handlerdir dedupd)/minimal.so"

# example TOPIC KEY [dedup extra] [handler config]: its config, migrate and
# grants, its messages.
example() {
  local ex="$1" topic="$2" key="$3" grants="$TB_DIR/$1/grants.sql"
  [[ $ex == ledger ]] && grants=
  TB_TOPIC=$topic TB_GROUP=g$ex TB_KEY=$key TB_DEDUP_EXTRA=${4:-} TB_HANDLER_CONFIG=${5:-} \
    TB_HANDLER="$TB_DIR/$ex/build/$ex.so" tb_config "$TB_DIR/$ex.conf"
  TB_HANDLER_GRANTS=$grants tb_migrate || tb_die "migrate of the $ex example failed"
  sed 's/^/0\t-\t/' "$TB_DIR/$ex/messages.jsonl" | tb_produce "$topic" 2>/dev/null ||
    tb_die "produce to $topic failed"
}
example minimal signups 'signup:${user_id}'
example coupon coupons 'coupon:${code}:${event_id}' 'lane_key = "${code}";'
example ledger payments 'pay:${merchant_id}:${order_no}' 'lane_key = "${merchant_id}";' \
  'table_prefix = "";'
for ex in minimal coupon ledger; do
  timeout --foreground 120 "$DEDUPD" run -c "$TB_DIR/$ex.conf" --exit-at-end >"$TB_DIR/$ex.log" 2>&1 &
  eval "pid_$ex=$!"
done
for ex in minimal coupon ledger; do
  rc=0
  eval "wait \$pid_$ex" || rc=$?
  tb_eq "the installed dedupd ran the $ex example to the end" 0 "$rc"
done

tb_eq "minimal: one row per signup, the quote escaped" "u1 ada@example.com
u2 grace@example.com
u3 o'brien@example.com" "$(tb_sql 'SELECT user_id, email FROM signup ORDER BY user_id' | tr '\t' ' ')"
tb_eq "coupon: C1 redeemed by o1, C2 new, C3 redeemed" "C1 REDEEMED o1
C2 NEW NULL
C3 REDEEMED o3" "$(tb_sql 'SELECT code, status, order_no FROM coupon ORDER BY code' | tr '\t' ' ')"
tb_eq "coupon: o2's redemption applied as refused" '{"redeemed":false}' \
  "$(tb_sql "SELECT response FROM dedup_record WHERE biz_key = 'coupon:C1:e4'")"
tb_check "coupon: host->log's line carries the message's fields" \
  grep -q 'topic="coupons" partition=0 offset=3 key="coupon:C1:e4" msg="handler coupon: coupon C1 is REDEEMED (order o1): not redeemed for order o2"' \
  "$TB_DIR/coupon.log"
tb_eq "ledger: balances" "m1 EUR 1975 2
m2 USD 10000 1
m3 GBP 99 1" "$(tb_sql 'SELECT merchant_id, currency, balance_cents, entries FROM merchant_balance ORDER BY 1' |
  tr '\t' ' ')"
tb_eq "ledger: one entry per payment" 4 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_eq "dead letters: the signup without email, the zero coupon, the negative payment" \
  "rejected 1 rejected 1 rejected 1" \
  "$(for t in signups coupons payments; do tb_dlq_reasons "$t.dlq"; done | tr '\n' ' ' | sed 's/ $//')"
tb_assert_committed_at_end gminimal signups
tb_assert_committed_at_end gcoupon coupons
tb_assert_committed_at_end gledger payments
tb_done
