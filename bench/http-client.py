#!/usr/bin/env python3
"""A plain client for the HTTP handler's benchmark (bench/http.sh): C
threads, each with one kept-alive connection, POST payments with unique
Idempotency-Keys to URL for SECONDS, then print the calls per second the
service answered (2xx) over that time. What the reference service can take
from a client that does nothing else, to judge dedupd's rate against.

  http-client.py URL CONCURRENCY SECONDS
"""
import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def worker(url, idx, until, counts):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    n = 0
    while time.monotonic() < until:
        key = "bench:%d:%d" % (idx, n)
        body = json.dumps({"merchant_id": "m%d" % idx, "order_no": str(n), "amount": "1.00"})
        conn.request("POST", u.path, body, {"Content-Type": "application/json",
                                             "Idempotency-Key": key, "Dedupd-Fence": "1"})
        resp = conn.getresponse()
        resp.read()
        if 200 <= resp.status < 300:
            n += 1
    counts[idx] = n


def main():
    url, conc, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    counts = [0] * conc
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(url, i, t0 + secs, counts))
               for i in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("%.1f" % (sum(counts) / (time.monotonic() - t0)))


if __name__ == "__main__":
    main()
