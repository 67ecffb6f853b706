#!/usr/bin/env bash
# 183: `dedupd describe` writes each route's contract as AsyncAPI 3.0.
# The shipped example configurations (one route; two routes, one by a
# pattern, one with its own dead-letter topic; the examples' own), an
# external-mode route, an Avro route (its writer schema from a test
# registry) and a route of the HTTP handler are described as JSON and as YAML, and every document
# is validated by the AsyncAPI initiative's own parser (@asyncapi/parser,
# installed from npm by tests/tools/asyncapi/check). The x-idempotency
# extension must say what the configuration says: the key template and its
# fields, the example key as dedupd renders it, the request hash's fields,
# the window, the mode, the dead-letter topic. Changing the key template
# changes the document; changing where dedupd runs (brokers, database,
# workers, batches) does not change a byte.
source "$(dirname "$0")/../lib.sh"
tb_init describe_asyncapi
SRC=$DD_TEST_SRC_DIR
CHECK=$SRC/tests/tools/asyncapi/check
export DEDUPD_MYSQL_PASSWORD=example-pw
out=$TB_DIR/docs
mkdir -p "$out"
fails() { ! "$@" >/dev/null 2>&1; }

# ---- the shipped configurations
"$DEDUPD" describe -c "$SRC/config/dedupd.conf" >"$out/main.json" || tb_die "describe failed"
"$DEDUPD" describe -c "$SRC/config/dedupd.conf" --format yaml >"$out/main.yaml" ||
  tb_die "describe --format yaml failed"
tb_check "two routes without --route or --output is refused" \
  fails "$DEDUPD" describe -c "$SRC/config/routes.conf"
tb_eq "its exit code" 2 "$("$DEDUPD" describe -c "$SRC/config/routes.conf" >/dev/null 2>&1; echo $?)"
"$DEDUPD" describe -c "$SRC/config/routes.conf" --output "$out" || tb_die "describe --output failed"
"$DEDUPD" describe -c "$SRC/config/routes.conf" --route coupons --format yaml \
  >"$out/coupons.yaml" || tb_die "describe --route failed"
for ex in ledger coupon minimal; do
  DEDUPD_HANDLER_PATH=$DD_LEDGER_SO "$DEDUPD" describe -c "$SRC/examples/$ex/dedupd.conf" \
    >"$out/example-$ex.json" || tb_die "describe examples/$ex/dedupd.conf failed"
done

# ---- external mode: a route whose handler acts on another system
cat >"$TB_DIR/external.conf" <<EOF
kafka   = { brokers = "127.0.0.1:9"; group = "g"; topics = ["notes"]; };
mysql   = { socket = "/nonexistent.sock"; user = "u"; database = "d"; };
dedup   = { key = "note:\${id}:\${lines[1].sku}"; hash = ["amount"]; ttl = "3d"; };
handler = { path = "$DD_NOTIFY_SO"; config = { database = "d"; socket = "/nonexistent.sock"; }; };
EOF
"$DEDUPD" describe -c "$TB_DIR/external.conf" >"$out/external.json" || tb_die "describe external"

# ---- an Avro route: the writer schema of its topic's subject, from the registry
source "$(dirname "$0")/../avro/avro.sh"
tb_registry
tb_avro --versions 2 </dev/null >/dev/null || tb_die "registering the payment schemas failed"
cat >"$TB_DIR/avro.conf" <<EOF
kafka   = { brokers = "127.0.0.1:9"; group = "g"; topics = ["payments"]; };
mysql   = { socket = "/nonexistent.sock"; user = "u"; database = "d"; };
dedup   = { key = "pay:\${merchant_id}:\${order_no}"; format = "avro"; };
handler = { path = "$DD_LEDGER_SO"; };
schema_registry = { url = "$TB_REGISTRY_URL"; timeout = "5s"; };
EOF
"$DEDUPD" describe -c "$TB_DIR/avro.conf" >"$out/avro.json" || tb_die "describe an Avro route"
"$DEDUPD" describe -c "$TB_DIR/avro.conf" --format yaml >"$out/avro.yaml" ||
  tb_die "describe an Avro route as YAML"

# ---- the HTTP handler: the headers the service gets, as configured
cat >"$TB_DIR/http.conf" <<EOF
kafka   = { brokers = "127.0.0.1:9"; group = "g"; topics = ["orders"]; };
mysql   = { socket = "/nonexistent.sock"; user = "u"; database = "d"; };
dedup   = { key = "order:\${id}"; };
handler = { http = { url = "http://127.0.0.1:9/orders"; key_header = "X-Request-Key";
                     reconcile_url = "http://127.0.0.1:9/orders/\${key}"; }; };
EOF
"$DEDUPD" describe -c "$TB_DIR/http.conf" >"$out/http.json" || tb_die "describe the HTTP handler"

tb_check "every document is valid AsyncAPI (@asyncapi/parser)" "$CHECK" "$out"/*.json "$out"/*.yaml

# ---- what x-idempotency says, against the configurations
tb_eq "x-idempotency matches each configuration" "ok" "$(python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
bad = []
def doc(name):
    return json.load(open(os.path.join(out, name)))
def x(d, op):
    return d["operations"][op]["x-idempotency"]
def expect(what, got, want):
    if got != want:
        bad.append("%s: got %r, want %r" % (what, got, want))

m = doc("main.json")
xi = x(m, "consume.payments")
expect("main key", xi["key"]["template"], "pay:${merchant_id}:${order_no}")
expect("main key fields", xi["key"]["fields"], ["merchant_id", "order_no"])
expect("main key format", xi["key"]["format"], "pay:{merchant_id}:{order_no}")
expect("main example key", xi["key"]["example"]["key"], "pay:merchant_id-1:order_no-1")
expect("main ttl", xi["window"]["ttlSeconds"], 7 * 86400)
expect("main mode", xi["mode"], "local")
expect("main dead letters", m["channels"]["deadLetters.payments"]["address"], "payments.dlq")
expect("main states", sorted(xi["states"]), ["applied", "failed"])
reasons = [r["reason"] for r in xi["deadLetterReasons"]]
for r in ("conflict", "bad_json", "key_missing", "rejected"):
    if r not in reasons: bad.append("main: reason %s missing" % r)
for r in ("unresolved", "bad_avro", "wrong_shard"):
    if r in reasons: bad.append("main: reason %s listed for a plain JSON route" % r)
hdrs = m["components"]["messages"]["deadLetter"]["headers"]["properties"]
expect("dead-letter reason header", sorted(hdrs["dedupd.reason"]["enum"]), sorted(reasons))
payload = m["components"]["messages"]["message"]["payload"]
expect("main payload required", payload.get("required"), ["merchant_id", "order_no"])

p = doc("payments.asyncapi.json")
expect("routes: payments topics", sorted(c["address"] for k, c in p["channels"].items()
                                         if not k.startswith("deadLetters.")),
       ["payments", "payments-eu"])
expect("routes: one dead-letter channel", [c["address"] for k, c in p["channels"].items()
                                           if k.startswith("deadLetters.")], ["payments.dlq"])
expect("routes: lane key", x(p, "consume.payments")["orderingKey"]["template"], "${merchant_id}")
c = doc("coupons.asyncapi.json")
expect("routes: coupons pattern", c["channels"]["pattern1"]["x-dedupd-topic-pattern"],
       "^coupons(-[a-z]+)?$")
expect("routes: coupons key", x(c, "consume.pattern1")["key"]["template"],
       "coupon:${code}:${event_id}")

e = doc("external.json")
xe = x(e, "consume.notes")
expect("external mode", xe["mode"], "external")
expect("external states", sorted(xe["states"]), ["applied", "failed", "processing"])
expect("external hash", xe["requestHash"]["fields"], ["amount"])
expect("external ttl", xe["window"]["ttl"], "3d")
expect("external example key", xe["key"]["example"]["key"], "note:id-1:sku-1")
if "downstream" not in xe: bad.append("external: no downstream contract")
if "unresolved" not in [r["reason"] for r in xe["deadLetterReasons"]]:
    bad.append("external: reason unresolved missing")
lines = e["components"]["messages"]["message"]["payload"]["properties"]["lines"]
expect("external array path", (lines["type"], lines["minItems"]), ("array", 2))
a = doc("avro.json")
am = a["components"]["messages"]["message.payments"]
expect("avro: the channel's message", a["channels"]["payments"]["messages"]["message"]["$ref"],
       "#/components/messages/message.payments")
expect("avro: subject", (am["x-dedupd-subject"], am["x-dedupd-subject-version"]),
       ("payments-value", 2))
expect("avro: schema format", am["payload"]["schemaFormat"],
       "application/vnd.apache.avro;version=1.9.0")
expect("avro: the writer schema", am["payload"]["schema"].get("type"), "record")
reasons = [r["reason"] for r in x(a, "consume.payments")["deadLetterReasons"]]
for r in ("bad_avro", "schema_unknown"):
    if r not in reasons: bad.append("avro: reason %s missing" % r)

h = x(doc("http.json"), "consume.orders")
expect("http: mode", h["mode"], "external")
hh = h["downstream"].get("http", {})
expect("http: the key's header", hh.get("idempotencyKeyHeader"), "X-Request-Key")
expect("http: the fence's header", hh.get("fenceHeader"), "Dedupd-Fence")
if not hh.get("reconcile", "").startswith("GET"): bad.append("http: no reconcile GET")
print("ok" if not bad else "\n".join(bad))
PY
)"

# ---- the document follows the contract, and only the contract
export DEDUPD_HANDLER_PATH=$DD_LEDGER_SO
base=$TB_DIR/base.conf
cp "$SRC/config/dedupd.conf" "$base"
variant() { # NAME SED-EXPR: base.conf changed by the expression, described
  sed -e "$2" "$base" >"$TB_DIR/$1.conf"
  cmp -s "$base" "$TB_DIR/$1.conf" && tb_die "variant $1 changed nothing"
  "$DEDUPD" describe -c "$TB_DIR/$1.conf" >"$out/v-$1.json" || tb_die "describe variant $1"
}
"$DEDUPD" describe -c "$base" >"$out/v-base.json" || tb_die "describe base"
variant key 's/key = "pay:${merchant_id}:${order_no}"/key = "pay:${merchant_id}:${txn_id}"/'
variant brokers 's/brokers = "[^"]*"/brokers = "10.0.0.9:9092"/'
variant mysql 's/database = "[^"]*"/database = "elsewhere"/'
variant run 's/max_messages = [0-9]*/max_messages = 17/; s/^workers = [0-9]*/workers = 9/'
tb_check "a new key template changes the document" fails cmp -s "$out/v-base.json" "$out/v-key.json"
tb_check "the key template in the new document" grep -q 'pay:\${merchant_id}:\${txn_id}' \
  "$out/v-key.json"
tb_check "and its version" fails test "$(grep -m1 '"version"' "$out/v-base.json")" = \
  "$(grep -m1 '"version"' "$out/v-key.json")"
for v in brokers mysql run; do
  tb_check "changing $v leaves the document as it was" cmp "$out/v-base.json" "$out/v-$v.json"
done
tb_check "the same configuration, the same bytes" cmp "$out/v-base.json" \
  <("$DEDUPD" describe -c "$base")
tb_done
