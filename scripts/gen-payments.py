#!/usr/bin/env python3
"""Generates a stream of payment callbacks, as a payment gateway delivers them.

Gateways deliver callbacks at least once: the same payment arrives several
times, re-serialised (other field order, other whitespace, escaped or raw
UTF-8, 12.3 vs 12.30), on other partitions and much later than the first
copy. Mixed in are messages that must go to the dead-letter topic. The output
feeds `ddtk produce` (one line per message: PARTITION<TAB>KEY<TAB>PAYLOAD,
key "-" = null, payload "hex:..." = bytes). With --expect, a JSON summary of
what a correct run must leave behind is written too.

Payload of a good message (about 250 bytes), as examples/ledger/ledger.c wants:
  {"merchant_id": "m007", "order_no": "P00001234", "amount": 12.34,
   "currency": "CNY", "status": "PAID", "ts": "...", "channel": "alipay",
   "payer": {"id": "u123456", "name": "...", "bank": "ICBC"}, "txn_id": "..."}
The key template is pay:${merchant_id}:${order_no}. A negative amount is
rejected by the ledger handler. The ledger credits `amount` to the merchant's
CNY balance and counts one entry per applied payment.

Bad messages (--bad N, spread over these kinds, each delivered once):
  bad_json      truncated/invalid JSON text, or binary bytes (not UTF-8)
  key_missing   order_no missing, merchant_id null, order_no object/array
  key_too_long  order_no so long that the key exceeds 255 bytes
  rejected      negative amount (the handler says REJECT)
Conflicts (--conflicts N): N payments get a second version with another
amount. Both versions go to the same partition, original first, so the
original is always the one applied and the second is a `conflict`.
"""
import argparse
import json
import random
import sys

MAX_KEY = 255
BAD_KINDS = [
    ('bad_json', 'text'), ('bad_json', 'binary'),
    ('key_missing', 'no_order_no'), ('key_missing', 'null_merchant'),
    ('key_missing', 'order_object'), ('key_missing', 'order_array'),
    ('key_too_long', 'long_order'),
    ('rejected', 'negative'),
]
CHANNELS = ['alipay', 'wechat', 'unionpay', 'card', 'bank_transfer']
BANKS = ['ICBC', 'CCB', 'ABC', 'BOC', 'CMB', 'SPDB']
NAMES = ['Zhang Wei', '张伟', 'Li Na', '李娜', 'Müller', 'O\'Brien', 'Ana "Ani" Silva']
AMT = '\x00AMT\x00'  # stand-in for the amount token, replaced after encoding
AMT_JSON = json.dumps(AMT)
SEPARATORS = [(',', ':'), (', ', ': '), (',', ': '), (' , ', ' : ')]
# Encoders built once: json.dumps with options builds a new one per call.
PLAIN = json.JSONEncoder(ensure_ascii=False, separators=(',', ':'))
VARIANTS = [json.JSONEncoder(ensure_ascii=asc, separators=sep)
            for asc in (False, True) for sep in SEPARATORS]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--keys', type=int, default=1000, help='unique good payments')
    p.add_argument('--dup-min', type=int, default=1, help='min deliveries per payment')
    p.add_argument('--dup-max', type=int, default=4, help='max deliveries per payment')
    p.add_argument('--partitions', type=int, default=4)
    p.add_argument('--merchants', type=int, default=50)
    p.add_argument('--bad', type=int, default=0, help='bad messages (see above)')
    p.add_argument('--conflicts', type=int, default=0, help='payments with a conflicting version')
    p.add_argument('--window', type=int, default=2000,
                   help='mean distance (messages) from a payment to its redelivery')
    p.add_argument('--edge', action='store_true',
                   help='add good edge-case keys: 64-byte and non-ASCII order_no')
    p.add_argument('--first-key', type=int, default=0,
                   help='number of the first order (P<number>), for streams of new keys')
    p.add_argument('--order-shape', choices=('seq', 'uuid'), default='seq',
                   help='order numbers: seq, P<number> rising with time (keys in time order);'
                   ' uuid, a random UUID each (keys in no order)')
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--expect', metavar='FILE', help='write the expected outcome as JSON')
    a = p.parse_args()
    if not (1 <= a.dup_min <= a.dup_max):
        p.error('need 1 <= --dup-min <= --dup-max')
    if a.partitions < 1 or a.merchants < 1 or a.keys < 0 or a.bad < 0:
        p.error('counts must be positive')
    if a.conflicts > a.keys:
        p.error('--conflicts cannot exceed --keys')
    return a


class Gen:
    def __init__(self, args):
        self.a = args
        self.rnd = random.Random(args.seed)
        self.events = []  # (time, partition, kafka_key, payload_text)
        self.serial = 0
        # random.randrange/shuffle dominate the run time at 300k messages;
        # int(random() * n) and a pool of field orders are several times faster.
        self.orders = [self.permutation(10) for _ in range(64)]
        self.payer_orders = [self.permutation(3) for _ in range(6)]

    def below(self, n):
        return int(self.rnd.random() * n)

    def pick(self, seq):
        return seq[int(self.rnd.random() * len(seq))]

    def permutation(self, n):
        idx = list(range(n))
        self.rnd.shuffle(idx)
        return idx

    # --- payloads -------------------------------------------------------

    def payment(self, merchant, order_no, cents):
        b = self.below
        return {
            'merchant_id': merchant,
            'order_no': order_no,
            'amount': cents,  # rendered by amount_text()
            'currency': 'CNY',
            'status': 'PAID',
            'ts': '2024-05-%02dT%02d:%02d:%02d.%03dZ' % (
                1 + b(28), b(24), b(60), b(60), b(1000)),
            'channel': self.pick(CHANNELS),
            'payer': {'id': 'u%06d' % b(10 ** 6), 'name': self.pick(NAMES),
                      'bank': self.pick(BANKS)},
            'txn_id': 'T2024%08d%08d' % (b(10 ** 8), b(10 ** 8)),
        }

    def amount_text(self, cents, variant):
        """The same decimal written the ways different serialisers write it."""
        sign = '-' if cents < 0 else ''
        whole, frac = divmod(abs(cents), 100)
        if variant == 0 or frac % 10:
            return '%s%d.%02d' % (sign, whole, frac)
        if frac == 0:
            return '%s%d' % (sign, whole) if variant == 1 else '%s%d.0' % (sign, whole)
        return '%s%d.%d' % (sign, whole, frac // 10)  # 12.30 -> 12.3

    def render(self, obj, first):
        """One serialisation; the first copy is plain, copies vary."""
        cents = obj.get('amount')
        has_amount = isinstance(cents, int)
        if has_amount:
            obj = dict(obj, amount=AMT)
        if first:
            text = PLAIN.encode(obj)
            variant = 0
        else:
            r = self.rnd
            items = list(obj.items())
            if len(items) == 10:
                items = [items[i] for i in self.pick(self.orders)]
            payer = obj.get('payer')
            if isinstance(payer, dict) and len(payer) == 3:
                pitems = list(payer.items())
                payer = dict(pitems[i] for i in self.pick(self.payer_orders))
                items = [(k, payer if k == 'payer' else v) for k, v in items]
            text = self.pick(VARIANTS).encode(dict(items))
            if r.random() < 0.2:
                text = ' ' + text + ' '
            variant = self.below(3)
        if has_amount:
            text = text.replace(AMT_JSON, self.amount_text(cents, variant))
        return text

    def order_no(self, number):
        """P<number>, or with --order-shape uuid a random version-4 UUID."""
        if self.a.order_shape == 'seq':
            return 'P%08d' % number
        h = '%032x' % self.rnd.getrandbits(128)
        return '%s-%s-4%s-a%s-%s' % (h[:8], h[8:12], h[13:16], h[17:20], h[20:])

    def kafka_key(self):
        """Gateways set arbitrary Kafka keys; dedupd must never use them."""
        self.serial += 1
        r = self.rnd.random()
        if r < 0.3:
            return '-'
        return 'cb-%08x' % (self.serial * 2654435761 % 2 ** 32)

    def emit(self, t, part, text):
        self.events.append((t, part, self.kafka_key(), text))

    # --- stream ---------------------------------------------------------

    def deliveries(self, t0):
        """Times of all deliveries of one payment: first at t0, then later."""
        r, a = self.rnd, self.a
        n = a.dup_min + self.below(a.dup_max - a.dup_min + 1)
        times = [t0]
        for _ in range(n - 1):
            # Mostly near (gateway retry), sometimes far (replay, redelivery).
            gap = r.expovariate(1.0 / a.window) if r.random() < 0.7 else r.uniform(0, 3 * a.window)
            times.append(t0 + 0.5 + gap)
        return times

    def good(self, idx, merchant, order_no, cents, t0, conflict):
        obj = self.payment(merchant, order_no, cents)
        times = self.deliveries(t0)
        parts = [self.below(self.a.partitions) for _ in times]
        for i, (t, part) in enumerate(zip(times, parts)):
            self.emit(t, part, self.render(obj, i == 0))
        if conflict:
            other = cents + self.rnd.choice([-1, 1]) * self.rnd.randint(1, 500)
            if other <= 0:
                other = cents + 100
            obj2 = dict(obj, amount=other)
            # Same partition as the first delivery, after it: the original wins.
            self.emit(t0 + 0.25 + self.rnd.uniform(0, self.a.window), parts[0],
                      self.render(obj2, False))

    def bad(self, kind, t, merchant, idx):
        r = self.rnd
        order_no = 'B%08d' % idx
        obj = self.payment(merchant, order_no, r.randint(100, 99999))
        if kind == 'text':
            text = self.render(obj, True)
            cut = r.choice([len(text) // 2, len(text) - 1])
            text = r.choice([text[:cut], text.replace('":', '"', 1), "{merchant_id: 'm001'}",
                             'null,', '{"a":1}}'])
        elif kind == 'binary':
            raw = bytes([0xff, 0xfe, 0x00]) + bytes(r.randrange(256) for _ in range(40))
            text = 'hex:' + raw.hex()
        elif kind == 'no_order_no':
            del obj['order_no']
            text = self.render(obj, True)
        elif kind == 'null_merchant':
            obj['merchant_id'] = None
            text = self.render(obj, True)
        elif kind == 'order_object':
            obj['order_no'] = {'id': order_no}
            text = self.render(obj, True)
        elif kind == 'order_array':
            obj['order_no'] = [order_no]
            text = self.render(obj, True)
        elif kind == 'long_order':
            obj['order_no'] = order_no + 'L' * (MAX_KEY + 1 - len('pay:%s:%s' % (merchant, order_no)))
            text = self.render(obj, True)
        elif kind == 'negative':
            obj['amount'] = -r.randint(1, 99999)
            text = self.render(obj, True)
        else:
            raise AssertionError(kind)
        self.emit(t, r.randrange(self.a.partitions), text)
        return 'pay:%s:%s' % (merchant, obj['order_no']) if kind in ('negative',) else None

    def run(self):
        a, r = self.a, self.rnd
        merchants = ['m%03d' % (i + 1) for i in range(a.merchants)]
        balances = {m: {'balance_cents': 0, 'entries': 0} for m in merchants}
        conflict_idx = set(r.sample(range(a.keys), a.conflicts))
        conflict_keys, rejected_keys = [], []
        specs = []
        for i in range(a.keys):
            specs.append((merchants[i % a.merchants], self.order_no(a.first_key + i),
                          1 + self.below(99999)))
        if a.edge:
            m = merchants[0]
            specs.append((m, 'E' * 64, 4242))     # the ledger's longest order_no
            specs.append((m, 'E-订单-ü', 1001))   # UTF-8 key bytes
        for i, (m, order_no, cents) in enumerate(specs):
            self.good(i, m, order_no, cents, float(i), i in conflict_idx)
            balances[m]['balance_cents'] += cents
            balances[m]['entries'] += 1
            if i in conflict_idx:
                conflict_keys.append('pay:%s:%s' % (m, order_no))
        dead = {'bad_json': 0, 'key_missing': 0, 'key_too_long': 0, 'rejected': 0,
                'conflict': len(conflict_keys)}
        span = max(len(specs), 1)
        for j in range(a.bad):
            reason, kind = BAD_KINDS[j % len(BAD_KINDS)]
            key = self.bad(kind, r.uniform(0, span), merchants[j % a.merchants], j)
            dead[reason] += 1
            if key:
                rejected_keys.append(key)
        self.events.sort(key=lambda e: e[0])
        expect = {
            'total_messages': len(self.events),
            'partitions': a.partitions,
            'unique_keys_applied': len(specs),
            'merchants': {m: v for m, v in balances.items() if v['entries']},
            'balance_cents_total': sum(v['balance_cents'] for v in balances.values()),
            'dead_letters': dead,
            'dead_letters_total': sum(dead.values()),
            'dedup_rows': {'applied': len(specs), 'failed': len(rejected_keys)},
            'conflict_keys': sorted(conflict_keys),
            'rejected_keys': sorted(rejected_keys),
            'seed': a.seed,
        }
        return expect

    def write(self, out):
        buf = []
        for _, part, key, text in self.events:
            buf.append('%d\t%s\t%s\n' % (part, key, text))
            if len(buf) >= 10000:
                out.write(''.join(buf))
                buf.clear()
        out.write(''.join(buf))


def main():
    args = parse_args()
    gen = Gen(args)
    expect = gen.run()
    out = sys.stdout
    try:
        gen.write(out)
        out.flush()
    except BrokenPipeError:
        sys.stderr.write('gen-payments: output pipe closed early\n')
        return 1
    if args.expect:
        with open(args.expect, 'w') as f:
            json.dump(expect, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
