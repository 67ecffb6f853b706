#!/usr/bin/env bash
# 64: configurations of routes that cannot run stop before anything is
# consumed, naming what is wrong and where: a topic two routes list, a
# topic no route takes (kafka.topics beside routes), two routes on one
# dedup table, two routes of one name (each naming both places, FILE:LINE),
# and two routes' patterns that both match a topic of the cluster: `dedupd
# check` fails on it, and `dedupd run` stops when the topic is assigned,
# with nothing applied and no offset committed.
source "$(dirname "$0")/../lib.sh"
tb_init routes_config_errors
tb_mock payments:2 coupons:1

route() { # NAME TOPICS TABLE: a route group on one line
  echo "{ name = \"$1\"; topics = [$2]; key = \"k:\${id}\"; table = \"$3\"; handler = { path = \"$DD_LEDGER_SO\"; }; }"
}
# fails NAME WANT ROUTES: `dedupd run` on that configuration exits 1 with
# an error matching WANT (an extended regex; FILE is the file, R0 the line
# of `routes = (`, R1 and R2 those of the first two routes).
fails() {
  local name="$1" want="$2" routes="$3" rc=0 file r0
  TB_CONF="$TB_DIR/$name.conf" tb_config_routes "$routes"
  file="$TB_DIR/$name.conf"
  timeout --foreground "$(tb_secs 30)" "$DEDUPD" run -c "$file" --exit-at-end \
    >"$TB_DIR/$name.log" 2>&1 || rc=$?
  tb_eq "$name: dedupd run exits 1" 1 "$rc"
  r0=$(grep -n '^routes = ($' "$file" | cut -d: -f1)
  want=${want//FILE/$file}
  want=${want//R0/$r0}
  want=${want//R1/$((r0 + 1))}
  want=${want//R2/$((r0 + 2))}
  tb_check "$name: $(sed -n '$p' "$TB_DIR/$name.log")" grep -Eq "$want" "$TB_DIR/$name.log"
}

fails topic_in_two "FILE:R2: route b: setting topics: topic payments is route a's too \(FILE:R1: \"payments\"\): a topic belongs to one route" \
  "$(route a '"payments"' t1),
$(route b '"coupons", "payments"' t2)"
TB_KAFKA_EXTRA='topics = ["payments", "coupons"];' fails topic_in_none \
  "FILE:4: setting kafka.topics: cannot be set beside routes \(FILE:R0\): dedupd consumes the topics the routes list \(routes\[\]\.topics\); topic coupons is in no route" \
  "$(route a '"payments"' t1)"
fails one_table "FILE:R2: route b: setting table: route a \(FILE:R1\) has the dedup table t1 too; each route needs its own" \
  "$(route a '"payments"' t1),
$(route b '"coupons"' t1)"
fails one_name "FILE:R2: route a: setting name: the route at FILE:R1 has this name too; route names must differ" \
  "$(route a '"payments"' t1),
$(route a '"coupons"' t2)"

# Two patterns that both match the topic payments: the file loads (they
# could match nothing), check sees the cluster's topics, run stops when
# the group assigns it.
TB_CONF="$TB_DIR/overlap.conf"
tb_config_routes "$(route a '"^pay.*"' t1),
$(route b '"^[a-z].*s$"' t2)"
tb_migrate || tb_die "migrate failed"
rc=0
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.txt" 2>&1 || rc=$?
tb_eq "overlap: check fails" 1 "$rc"
r0=$(grep -n '^routes = ($' "$TB_CONF" | cut -d: -f1)
tb_check "overlap: check names the topic and both routes" grep -Eq \
  "^FAIL kafka: topic payments matches the topics of two routes: route a \($TB_CONF:$((r0 + 1))\) and route b \($TB_CONF:$((r0 + 2))\)" \
  "$TB_DIR/check.txt"
printf '0\t-\t{"id":"1","merchant_id":"m1","order_no":"o1","txn_id":"t1","amount":1.00,"currency":"EUR","status":"PAID"}\n' |
  tb_produce payments 2>/dev/null || tb_die "produce failed"
rc=0
tb_run || rc=$?
tb_eq "overlap: dedupd run exits 1" 1 "$rc"
tb_check "overlap: run names the topic and both routes" grep -Eq \
  "Stopping: the group assigned topic payments, which the topics of two routes match: route a \($TB_CONF:$((r0 + 1))\) and route b \($TB_CONF:$((r0 + 2))\)" \
  "$TB_DIR/run.log"
tb_eq "overlap: nothing applied" "0 0 0" \
  "$(tb_sql 'SELECT (SELECT COUNT(*) FROM t1), (SELECT COUNT(*) FROM t2), (SELECT COUNT(*) FROM ledger_entry)' | tr '\t' ' ')"
tb_eq "overlap: no offset committed" "" "$(tb_committed tg payments | awk '$2 >= 0')"
tb_done
