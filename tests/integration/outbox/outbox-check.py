#!/usr/bin/env python3
"""Checks the ledger's payment.booked events on the output topic against the
booked payments, for the outbox tests (120-126).

    outbox-check.py BOOKED_TSV OUT_JSONL

BOOKED_TSV: "ledger_id<TAB>merchant_id<TAB>order_no" per booked payment
(with shards, of every shard: a payment is known by its merchant and its
ledger id, which is per shard).
OUT_JSONL: `ddtk consume` of the output topic. Prints "name value" lines:
missing (booked payments without an event), unknown (events of no booked
payment), bad_id (a copy whose dedupd.event_id header differs from its
payload's event_id or from its first copy's, or whose key is not its
merchant), order_bad (per merchant, a first copy after a later booking's),
distinct_ids, copies (events seen again).
"""
import json
import sys


def main():
    booked = {}
    for line in open(sys.argv[1]):
        i, m, o = line.rstrip("\n").split("\t")
        booked[(m, int(i))] = o
    ids, last = {}, {}
    unknown = bad_id = order_bad = copies = 0
    for line in open(sys.argv[2]):
        r = json.loads(line)
        v = json.loads(r["payload"])
        eid = r["headers"].get("dedupd.event_id")
        if eid != v["event_id"] or r["key"] != v["merchant_id"]:
            bad_id += 1
        m = v["merchant_id"]
        lid = (m, v["ledger_id"])
        if booked.get(lid) != v["order_no"]:
            unknown += 1
        if lid in ids:
            copies += 1
            bad_id += ids[lid] != eid
            continue
        ids[lid] = eid
        if last.get(m, 0) > lid[1]:
            order_bad += 1
        last[m] = lid[1]
    print("missing", len(set(booked) - set(ids)))
    print("unknown", unknown)
    print("bad_id", bad_id)
    print("order_bad", order_bad)
    print("distinct_ids", len(set(ids.values())))
    print("copies", copies)


if __name__ == "__main__":
    main()
