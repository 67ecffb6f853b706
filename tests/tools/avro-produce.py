#!/usr/bin/python3
"""Re-encodes a payment stream as Avro in the Confluent wire format, for `ddtk produce`.

    avro-produce.py --registry URL [--subject S] [--versions 1|2|3] [--only-version N]
                    < stream > avro-stream
    avro-produce.py --registry URL --malformed              > avro-stream
    avro-produce.py --registry URL --ref-union | --references | --swap-keys
                    < stream > avro-stream

The input is scripts/gen-payments.py's (PARTITION<TAB>KEY<TAB>PAYLOAD lines);
the output the same lines with each payload "hex:" + a zero byte, the
writer schema's 4-byte big-endian id and the record's Avro binary, written
by Apache Avro's Python library (python3-avro), not by dedupd's code. The
schemas are registered with POST /subjects/S/versions first.

Schema versions, used in turn for the copies of one payment (the first copy
with v1, the next with v2, ...; --versions says how many to use):
  v1  the payment's fields, merchant_id and order_no nullable
  v2  the same fields in another order, unions with their branches swapped,
      ts made nullable: the same values decode to the same JSON
  v3  v1 and a field "source" with default "gateway" the producer sets
A payload that is not JSON (gen-payments' bad_json) becomes a record cut
short (bad_avro); key_missing payloads get a null in the key's field.

--ref-union writes every payment under v1 with a field "ref" of type
["null", "string", "bytes"]: a payload's "ref" is written as the string
branch, its "ref_hex" as the bytes branch (those bytes), else null.
--references writes them under v1 with its payer a record of another
subject, as Confluent's schema references do: payments-value refers to
com.example.pay.Payer of subject payer-value, which refers to
com.example.pay.Bank of subject bank-value (the payer's bank becomes
{"name": ...}); the producer parses the schemas with the referenced names
known, as Confluent's serializer does. --swap-keys registers and writes
v1 with the names of merchant_id and order_no swapped: what a registry
rebuilt without its ids could serve under v1's id.

--malformed writes one hostile record per line instead, each preceded by a
comment line "# REASON": a wrong magic byte, a schema id of 2^31, an unknown
id, a truncated record, a string length past the record, a huge array count,
a huge map count, nesting 10000 records deep, a float NaN, a map with a
key twice, a string holding U+0000.
"""
import argparse
import decimal
import io
import json
import sys
import urllib.request

import avro.io
import avro.name
import avro.schema

PAYER = {"type": "record", "name": "Payer", "fields": [
    {"name": "id", "type": "string"}, {"name": "name", "type": "string"},
    {"name": "bank", "type": "string"}]}
AMOUNT = {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}
V1 = {"type": "record", "name": "Payment", "namespace": "com.example.pay", "fields": [
    {"name": "merchant_id", "type": ["null", "string"]},
    {"name": "order_no", "type": ["null", "string"]},
    {"name": "amount", "type": AMOUNT},
    {"name": "currency", "type": "string"}, {"name": "status", "type": "string"},
    {"name": "ts", "type": "string"}, {"name": "channel", "type": "string"},
    {"name": "payer", "type": PAYER}, {"name": "txn_id", "type": "string"}]}
V2 = {"type": "record", "name": "Payment", "namespace": "com.example.pay", "fields": [
    {"name": "txn_id", "type": "string"},
    {"name": "payer", "type": {"type": "record", "name": "Payer", "fields": [
        {"name": "bank", "type": "string"}, {"name": "id", "type": "string"},
        {"name": "name", "type": "string"}]}},
    {"name": "order_no", "type": ["string", "null"]},
    {"name": "merchant_id", "type": ["string", "null"]},
    {"name": "ts", "type": ["null", "string"], "default": None},
    {"name": "amount", "type": AMOUNT}, {"name": "channel", "type": "string"},
    {"name": "status", "type": "string"}, {"name": "currency", "type": "string"}]}
V3 = dict(V1, fields=V1["fields"] + [{"name": "source", "type": "string", "default": "gateway"}])
REF_UNION = dict(V1, fields=V1["fields"] + [
    {"name": "ref", "type": ["null", "string", "bytes"], "default": None}])
SWAPPED = dict(V1, fields=[dict(f, name={"merchant_id": "order_no", "order_no": "merchant_id"}
                                .get(f["name"], f["name"])) for f in V1["fields"]])
BANK = {"type": "record", "name": "Bank", "namespace": "com.example.pay",
        "fields": [{"name": "name", "type": "string"}]}
PAYER_REF = {"type": "record", "name": "Payer", "namespace": "com.example.pay", "fields": [
    {"name": "id", "type": "string"}, {"name": "name", "type": "string"},
    {"name": "bank", "type": "com.example.pay.Bank"}]}
V1_REF = dict(V1, fields=[dict(f, type="com.example.pay.Payer") if f["name"] == "payer" else f
                          for f in V1["fields"]])
BAG = {"type": "record", "name": "Bag", "fields": [
    {"name": "s", "type": "string"},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "f", "type": "float"}]}
NODE = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}


CAFILE = None
CLIENT_CERT = None


def register(url, subject, schema, references=None):
    ctx = __import__("ssl").create_default_context(cafile=CAFILE) if CAFILE else None
    if ctx and CLIENT_CERT:
        ctx.load_cert_chain(*CLIENT_CERT)
    body = {"schema": json.dumps(schema)}
    if references:
        body["references"] = references
    req = urllib.request.Request(
        "%s/subjects/%s/versions" % (url.rstrip("/"), subject),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.load(r)["id"]


def encode(schema, sid, datum):
    buf = io.BytesIO()
    buf.write(b"\x00" + sid.to_bytes(4, "big"))
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def to_datum(payload, version):
    d = {k: payload.get(k) for k in ("merchant_id", "order_no", "currency", "status", "ts",
                                      "channel", "txn_id")}
    for k in ("merchant_id", "order_no"):
        if not isinstance(d[k], str):
            d[k] = None  # key_missing: absent, null, an object or an array
    d["amount"] = decimal.Decimal(str(payload["amount"])).quantize(decimal.Decimal("0.01"))
    d["payer"] = dict(payload["payer"])
    if version == 3:
        d["source"] = "gateway"
    if version == "ref_union":
        d["ref"] = bytes.fromhex(payload["ref_hex"]) if "ref_hex" in payload else payload.get("ref")
    if version == "references":
        d["payer"]["bank"] = {"name": d["payer"]["bank"]}
    if version == "swap_keys":
        d["merchant_id"], d["order_no"] = d["order_no"], d["merchant_id"]
    return d


def with_references(args):
    """v1 with its payer from subject payer-value, which uses bank-value."""
    names = avro.name.Names()
    register(args.registry, "bank-value", BANK)
    avro.schema.make_avsc_object(BANK, names)
    register(args.registry, "payer-value", PAYER_REF,
             [{"name": "com.example.pay.Bank", "subject": "bank-value", "version": 1}])
    avro.schema.make_avsc_object(PAYER_REF, names)
    sid = register(args.registry, args.subject, V1_REF,
                   [{"name": "com.example.pay.Payer", "subject": "payer-value", "version": 1}])
    return [(avro.schema.make_avsc_object(V1_REF, names), sid, "references")]


def reencode(args):
    chosen = ((1, V1), (2, V2), (3, V3))[:args.versions]
    if args.only_version:
        chosen = [((1, V1), (2, V2), (3, V3))[args.only_version - 1]]
    if args.ref_union:
        chosen = [("ref_union", REF_UNION)]
    if args.swap_keys:
        chosen = [("swap_keys", SWAPPED)]
    if args.references:
        versions = with_references(args)
    else:
        versions = [(avro.schema.parse(json.dumps(v)), register(args.registry, args.subject, v), n)
                    for n, v in chosen]
    copies = {}
    for line in sys.stdin:
        part, key, payload = line.rstrip("\n").split("\t", 2)
        try:
            p = json.loads(payload, parse_float=decimal.Decimal)
            if not isinstance(p, dict) or "amount" not in p:
                raise ValueError("no payment")
        except ValueError:  # gen-payments' bad_json: a record cut short
            schema, sid, n = versions[0]
            good = encode(schema, sid, to_datum(json.loads(
                '{"merchant_id":"m1","order_no":"x","amount":1,"currency":"CNY","status":"PAID",'
                '"ts":"t","channel":"c","payer":{"id":"u","name":"n","bank":"b"},"txn_id":"t"}'),
                n))
            print("%s\t%s\thex:%s" % (part, key, good[:len(good) // 2].hex()))
            continue
        ident = (str(p.get("merchant_id")), str(p.get("order_no")))
        i = copies.get(ident, 0)
        copies[ident] = i + 1
        schema, sid, n = versions[i % len(versions)]
        print("%s\t%s\thex:%s" % (part, key, encode(schema, sid, to_datum(p, n)).hex()))


def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def malformed(args):
    bag = register(args.registry, "bag-value", BAG)
    node = register(args.registry, "node-value", NODE)
    head = lambda sid: b"\x00" + sid.to_bytes(4, "big")
    ok_bag = head(bag) + zigzag(2) + b"hi" + zigzag(0) + zigzag(0) + b"\x00\x00\x80\x3f"
    cases = [
        ("bad_avro", b"\x01" + ok_bag[1:]),                           # wrong magic byte
        ("bad_avro", b"\x00\x80\x00\x00\x00" + ok_bag[5:]),           # schema id 2^31
        ("schema_unknown", head(9999) + ok_bag[5:]),                  # no such id
        ("bad_avro", ok_bag[:-3]),                                    # truncated
        ("bad_avro", head(bag) + zigzag(1000) + b"hi"),               # string past the end
        ("bad_avro", head(bag) + zigzag(0) + zigzag(1 << 40) + b"\x02"),    # huge array
        ("bad_avro", head(bag) + zigzag(0) + zigzag(0) + zigzag(1 << 50)),  # huge map
        ("bad_avro", head(node) + b"\x02" * 10000 + b"\x00"),         # 10000 deep
        ("bad_avro", head(bag) + zigzag(0) + zigzag(0) + zigzag(0) + b"\x00\x00\xc0\x7f"),  # NaN
        ("bad_avro", b"\x00\x00"),                                    # shorter than the header
        ("bad_avro", head(bag) + zigzag(0) + zigzag(0) + zigzag(2) + zigzag(1) + b"k" + zigzag(1)
         + zigzag(1) + b"k" + zigzag(2) + zigzag(0) + b"\x00\x00\x80\x3f"),  # a map key twice
        ("bad_avro", head(bag) + zigzag(3) + b"h\x00i" + zigzag(0) + zigzag(0)
         + b"\x00\x00\x80\x3f"),                                       # U+0000 in a string
    ]
    for i, (reason, data) in enumerate(cases):
        print("# %s" % reason)
        print("0\tbad-%d\thex:%s" % (i, data.hex()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--registry", required=True)
    p.add_argument("--subject", default="payments-value")
    p.add_argument("--versions", type=int, default=2, choices=(1, 2, 3))
    p.add_argument("--only-version", type=int, choices=(1, 2, 3),
                   help="every copy under this version (registering it alone)")
    p.add_argument("--malformed", action="store_true")
    p.add_argument("--ref-union", action="store_true", help="v1 with a union ref")
    p.add_argument("--references", action="store_true", help="v1 using schema references")
    p.add_argument("--swap-keys", action="store_true", help="v1 with two names swapped")
    p.add_argument("--cafile", help="CA certificates of an https registry")
    p.add_argument("--cert", help="a client certificate for the registry (with --key)")
    p.add_argument("--key", help="the client certificate's private key")
    args = p.parse_args()
    global CAFILE, CLIENT_CERT
    CAFILE = args.cafile
    CLIENT_CERT = (args.cert, args.key) if args.cert else None
    malformed(args) if args.malformed else reencode(args)


if __name__ == "__main__":
    main()
