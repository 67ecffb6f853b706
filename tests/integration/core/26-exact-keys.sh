#!/usr/bin/env bash
# 26: business keys and request hashes come from the exact payload text.
# Distinct payments that a double-based, C-string, unescaped reading would
# merge are each applied under their own key: integers above 2^53, strings
# that differ after a control byte, template fields whose values contain the
# separator. Payloads that are not RFC 8259 JSON (raw tab or newline in a
# string, leading zero, "7.", a byte-order mark, a duplicate member name, a
# lone surrogate), or that the handlers' tree would cut (a NUL in a string
# or a name), are dead-lettered bad_json with a reason naming what and
# where. A hashed field of 1e400, -1e400 or null, or absent, is a different
# request: a conflict, not a duplicate; the same number spelt otherwise
# (10e399) is a duplicate.
source "$(dirname "$0")/../lib.sh"
tb_init exact_keys
tb_mock events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='pay:${m}:${o}' TB_WORKERS=1 \
  TB_DEDUP_EXTRA='hash = ["amount"];' tb_config
tb_migrate || tb_die "migrate failed"

# One message per line: expected outcome, then the payload as Python bytes.
# Outcomes: "apply KEY", "dup", "conflict KEY", "bad TEXT" (TEXT in dedupd.error).
cat >"$TB_DIR/cases.py" <<'PY'
CASES = [
    ("apply pay:m1:9007199254740993", b'{"m":"m1","o":9007199254740993}'),
    ("apply pay:m1:9007199254740992", b'{"m":"m1","o":9007199254740992}'),
    ("apply pay:m1:18446744073709551617", b'{"m":"m1","o":18446744073709551617}'),
    ("apply pay:m1:18446744073709551616", b'{"m":"m1","o":18446744073709551616}'),
    ("apply pay:m1:x%01one", b'{"m":"m1","o":"x\\u0001one"}'),
    ("apply pay:m1:x%01two", b'{"m":"m1","o":"x\\u0001two"}'),
    ("bad NUL (\\u0000) in a string at byte 16", b'{"m":"m1","o":"x\\u0000one"}'),
    ("bad NUL (\\u0000) in a member name at byte 12", b'{"m":"m1","o\\u0000":"x","o":"y"}'),
    ("apply pay:m1:A%3AB", b'{"m":"m1","o":"A:B"}'),
    ("apply pay:m1%3AA:B", b'{"m":"m1:A","o":"B"}'),
    ("bad raw control character 0x09 in a string at byte 18", b'{"m":"m1","o":"tab\there"}'),
    ("bad raw control character 0x0a in a string at byte 18", b'{"m":"m1","o":"new\nline"}'),
    ("bad leading zero in a number at byte 14", b'{"m":"m1","o":007}'),
    ("bad no digit after '.' in a number at byte 14", b'{"m":"m1","o":7.}'),
    ("bad byte-order mark", b'\xef\xbb\xbf{"m":"m1","o":"bom"}'),
    ("bad duplicate member name \"o\"", b'{"m":"m1","o":"d1","o":"d2"}'),
    ("bad lone high surrogate", b'{"m":"m1","o":"\\ud800"}'),
    ("apply pay:m1:h1", b'{"m":"m1","o":"h1","amount":1e400}'),
    ("conflict pay:m1:h1", b'{"m":"m1","o":"h1","amount":-1e400}'),
    ("conflict pay:m1:h1", b'{"m":"m1","o":"h1","amount":null}'),
    ("dup", b'{"amount":10e399,"o":"h1","m":"m1"}'),
    ("apply pay:m1:h2", b'{"m":"m1","o":"h2","amount":null}'),
    ("conflict pay:m1:h2", b'{"m":"m1","o":"h2"}'),
    ("apply pay:m1:7", b'{"m":"m1","o":7}'),
    ("dup", b'{"m":"m1","o":7.0}'),
    ("dup", b'{"m":"m1","o":"7"}'),
]
PY
python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from cases import CASES
for _, payload in CASES:
    print("0\t-\thex:" + payload.hex())' "$TB_DIR" | tb_produce 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

# What the cases say must be there, from the same list.
want() {
  python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from cases import CASES
kind = sys.argv[2]
for off, (outcome, _) in enumerate(CASES):
    verb, _, rest = outcome.partition(" ")
    if verb == kind == "apply":
        print(rest)
    elif verb == kind:
        print(off, rest)' "$TB_DIR" "$1"
}

tb_eq "every distinct payment applied once, under its own key" \
  "$(want apply | LC_ALL=C sort | sed 's/$/ 1/')" \
  "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "one applied dedup row per payment" "$(want apply | wc -l)" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "no other dedup rows" "$(want apply | wc -l)" "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_eq "keys hold no NUL or control byte" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE biz_key REGEXP '[[:cntrl:]]'")"

# Dead letters: offset, reason, and the key (conflicts) or the error (bad_json).
tb_dlq >"$TB_DIR/dlq.jsonl"
got=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        h = json.loads(line)["headers"]
        r = h["dedupd.reason"]
        print(h["dedupd.offset"], r, h.get("dedupd.biz_key") if r == "conflict" else h.get("dedupd.error"))
' "$TB_DIR/dlq.jsonl" | sort -n)
check=$(python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from cases import CASES
got = {}
for line in sys.argv[2].splitlines():
    off, reason, detail = line.split(" ", 2)
    got[int(off)] = (reason, detail)
problems = []
for off, (outcome, _) in enumerate(CASES):
    verb, _, rest = outcome.partition(" ")
    g = got.pop(off, None)
    if verb == "bad":
        if not g or g[0] != "bad_json" or rest not in g[1]:
            problems.append("@%d: expected bad_json with %r, got %r" % (off, rest, g))
    elif verb == "conflict":
        if g != ("conflict", rest):
            problems.append("@%d: expected conflict on %s, got %r" % (off, rest, g))
    elif g:
        problems.append("@%d: unexpected dead letter %r" % (off, g))
problems += ["@%d: unexpected dead letter %r" % (o, g) for o, g in sorted(got.items())]
print("; ".join(problems) or "ok")' "$TB_DIR" "$got")
tb_eq "dead letters: bad_json with the reason and byte, conflicts with their key" ok "$check"
tb_eq "re-encoded copies are duplicates" "$(want dup | wc -l)" "$(tb_summary duplicates)"
tb_eq "conflicts" "$(want conflict | wc -l)" "$(tb_summary conflicts)"
tb_eq "the stored hash of pay:m1:h1 is the first copy's (1e400)" \
  "$(printf '%s' '{"amount":1e400}' | sha256sum | cut -c1-64)" \
  "$(tb_sql "SELECT LOWER(HEX(request_hash)) FROM dedup_record WHERE biz_key = 'pay:m1:h1'")"
tb_assert_committed_at_end
tb_done
