#!/usr/bin/env bash
# 140: two Avro values that differ only in a union's branch are two
# payments' worth of difference. Written by python3-avro under a schema
# whose field "ref" is ["null", "string", "bytes"]: payment P1 with the
# string "AP8i", then P1 again with the bytes 00 ff 22 (whose base64 is
# "AP8i"), then P1 with the string again, and P2 with the bytes. The
# decoded records name the branch ({"string": "AP8i"}, {"bytes": "AP8i"}),
# so the second copy of P1 is a conflict, dead-lettered with its own
# bytes, never a duplicate; the third is a duplicate. End state: P1 and P2
# booked once, one conflict (offset 1), offsets at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_union_branches
tb_mock payments:1
tb_registry
tb_avro_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 2 --dup-min 1 --dup-max 1 --partitions 1 --bad 0 --conflicts 0 --seed 3
python3 - "$TB_DIR/stream.txt" >"$TB_DIR/union.txt" <<'PY' || tb_die "cannot write the stream"
import json, sys
lines = [l.rstrip("\n").split("\t", 2) for l in open(sys.argv[1])]
(p1k, p1), (p2k, p2) = [(k, json.loads(v)) for _, k, v in lines]
for key, payload, ref in ((p1k, p1, {"ref": "AP8i"}), (p1k, p1, {"ref_hex": "00ff22"}),
                          (p1k, p1, {"ref": "AP8i"}), (p2k, p2, {"ref_hex": "00ff22"})):
    print("0\t%s\t%s" % (key, json.dumps(dict(payload, **ref))))
PY
tb_avro --ref-union <"$TB_DIR/union.txt" >"$TB_DIR/avro.txt" || tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/avro.txt" 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "dead letters" "conflict 1" "$(tb_dlq_reasons)"
tb_eq "the conflict is the copy with the bytes" "1 $(sed -n 2p "$TB_DIR/avro.txt" | cut -f3)" \
  "$(tb_dlq | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    print(m["headers"].get("dedupd.offset"), "hex:" + (m.get("payload_hex") or m["payload"].encode().hex()))')"
tb_eq "duplicates: the string copy" 1 "$(tb_summary duplicates)"
tb_eq "dedup rows applied" 2 "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
tb_assert_committed_at_end
tb_done
