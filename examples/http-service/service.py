#!/usr/bin/env python3
"""A reference downstream for dedupd's HTTP handler (docs/HANDLERS.md,
"External mode without C"): a small payments service that applies each
payment once however often it is called, written with Python's standard
library only.

What it does is what any service behind the handler must do:

  POST /payments        Idempotency-Key: K, Dedupd-Fence: F, a JSON body
      - a token lower than the highest seen for K: 409, nothing applied
        (a late call of an older claim; dedupd cannot stop it in flight);
      - K applied before with the same body: the stored answer again
        (201, Idempotent-Replayed: true), nothing applied;
      - K applied before with another body: 422;
      - else the effect (a line in the journal), the answer stored with K.
  GET /payments/K       Dedupd-Fence: F
      - records F first (an older claim's POST still on its way is then
        refused), then 200 with the stored answer, or 404 when K was not
        applied: dedupd's reconcile after a takeover.
  OPTIONS, HEAD /payments: 204 / 200, for `dedupd check`.

The check and the effect happen under one lock per key, and the state
(every applied key with its answer, the highest token of every key) is
in the journal, a file of JSON lines read back at start.

For tests and benchmarks: --delay-ms answers every POST after a fixed
time; --faults FILE injects faults by key (the file is read again when
it changes), one JSON object a line:

  {"match": "REGEX", "fault": "500", "times": 1}
  {"match": "REGEX", "fault": "429", "retry_after": "2"}      (or "date+2")
  {"match": "REGEX", "fault": "hang", "seconds": 3}  sleep, then go on
  {"match": "REGEX", "fault": "hang-after", "seconds": 3}  apply, sleep, answer
  {"match": "REGEX", "fault": "drop"}    apply, then close without answering
  {"match": "REGEX", "fault": "reset"}   close without answering or applying
  {"match": "REGEX", "fault": "409"}     any status: answered without applying
  {"match": "REGEX", "fault": "307", "location": "URL"}   a redirect

Each rule applies to the first `times` (1) POSTs of each key it matches.
--log FILE writes one JSON line per request (time, method, key, token,
status, fault, the Retry-After sent).
"""
import argparse
import email.utils
import hashlib
import json
import os
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote_to_bytes

MAX_BODY = 1 << 20


class Store:
    """Applied keys and their answers, the highest token of each key,
    kept in memory and in the journal."""

    def __init__(self, path):
        self.mu = threading.Lock()
        self.locks = {}
        self.applied = {}  # key -> {"hash", "answer"}
        self.fences = {}  # key -> highest token
        self.count = 0
        self.journal = None
        if path:
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        self._replay(json.loads(line))
            self.journal = open(path, "a", encoding="utf-8", buffering=1)

    def _replay(self, rec):
        key = rec["key"]
        self.fences[key] = max(self.fences.get(key, 0), rec["fence"])
        if rec["type"] == "apply":
            self.applied[key] = {"hash": rec["hash"], "answer": rec["answer"]}
            self.count += 1

    def _write(self, rec):
        if self.journal:
            line = json.dumps(rec, sort_keys=True) + "\n"
            with self.mu:
                self.journal.write(line)

    def lock(self, key):
        with self.mu:
            return self.locks.setdefault(key, threading.Lock())

    def see_fence(self, key, fence):
        """Raises the key's highest token to fence; False when fence is
        lower than one seen (under the key's lock)."""
        top = self.fences.get(key, 0)
        if fence < top:
            return False
        if fence > top:
            self.fences[key] = fence
            self._write({"type": "fence", "key": key, "fence": fence})
        return True

    def apply(self, key, fence, body_hash, payload):
        """The effect: one journal line, the answer kept with the key."""
        with self.mu:
            self.count += 1
            n = self.count
        answer = {"payment_id": n, "key": key, "fence": fence, "amount": payload.get("amount")}
        self._write({"type": "apply", "key": key, "fence": fence, "hash": body_hash,
                     "answer": answer, "payload": payload})
        self.applied[key] = {"hash": body_hash, "answer": answer}
        return answer


class Faults:
    """The rules of --faults, read again when the file changes."""

    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.rules = []
        self.used = {}  # (rule index, key) -> times used
        self.mu = threading.Lock()

    def _load(self):
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            self.rules, self.mtime = [], None
            return
        if mtime == self.mtime:
            return
        with open(self.path, encoding="utf-8") as f:
            self.rules = [json.loads(l) for l in f if l.strip()]
        self.mtime = mtime

    def take(self, key):
        """The rule to apply to this POST of key, or None."""
        if not self.path:
            return None
        with self.mu:
            self._load()
            for i, rule in enumerate(self.rules):
                if not re.search(rule["match"], key):
                    continue
                used = self.used.get((i, key), 0)
                if used < rule.get("times", 1):
                    self.used[(i, key)] = used + 1
                    return rule
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once
    server_version = "dedupd-reference-service"

    def log_message(self, fmt, *args):  # one JSON line per request instead
        pass

    def _log(self, key, fence, status, fault=None, retry_after=None):
        log = self.server.reqlog
        if log:
            line = json.dumps({"t": time.time(), "method": self.command, "path": self.path,
                               "key": key, "fence": fence, "status": status, "fault": fault,
                               "retry_after": retry_after})
            with self.server.reqlog_mu:
                log.write(line + "\n")

    def _send(self, status, obj=None, headers=()):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _close(self, reset):
        """Ends the connection without an answer (reset: with a TCP RST)."""
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        self.close_connection = True

    def _fence(self):
        try:
            return int(self.headers.get(self.server.fence_header, "0"))
        except ValueError:
            return None

    def _is_collection(self):
        return self.path.split("?")[0].rstrip("/") == self.server.base

    def do_OPTIONS(self):
        self._send(204 if self._is_collection() else 404, headers=[("Allow", "POST, GET, OPTIONS")])

    def do_HEAD(self):
        self._send(200 if self._is_collection() else 404)

    def do_GET(self):
        path = self.path.split("?")[0]
        prefix = self.server.base + "/"
        if not path.startswith(prefix):
            return self._send(404, {"error": "no such resource"})
        key = urllib_unquote(path[len(prefix):])
        fence = self._fence()
        if not self._authorized():
            return self._send(401, {"error": "who are you?"})
        if fence is None:
            return self._send(400, {"error": "bad token"})
        store = self.server.store
        with store.lock(key):
            store.see_fence(key, fence)  # an older claim's POST is refused from now on
            got = store.applied.get(key)
        self._log(key, fence, 200 if got else 404)
        if got:
            return self._send(200, got["answer"])
        return self._send(404, {"error": "not applied", "key": key})

    def _read_body(self):
        length = int(self.headers.get("Content-Length", "0"))
        if length > MAX_BODY:
            return None
        return self.rfile.read(length)

    def _fault(self, key, fence, rule):
        """A fault before the effect. True when the request ends here."""
        fault = rule["fault"]
        if fault == "hang":
            time.sleep(float(rule.get("seconds", 3)))
            return False
        if fault == "reset":
            self._log(key, fence, 0, fault)
            self._close(True)
            return True
        if fault.isdigit():
            headers = []
            ra = rule.get("retry_after")
            if rule.get("location"):
                headers.append(("Location", rule["location"]))
            if ra is not None and str(ra).startswith("date+"):
                when = time.time() + float(str(ra)[5:])
                headers.append(("Retry-After", email.utils.formatdate(when, usegmt=True)))
            elif ra is not None:
                headers.append(("Retry-After", str(ra)))
            self._log(key, fence, int(fault), fault, headers[-1][1] if ra is not None else None)
            self._send(int(fault), {"error": rule.get("error", "injected fault " + fault)},
                       headers)
            return True
        return False

    def _authorized(self):
        want = self.server.auth
        return not want or self.headers.get("Authorization") == "Bearer " + want

    def do_POST(self):
        if not self._is_collection():
            return self._send(404, {"error": "no such resource"})
        body = self._read_body()
        if not self._authorized():
            self.close_connection = body is None
            return self._send(401, {"error": "who are you?"})
        key = self.headers.get(self.server.key_header)
        fence = self._fence()
        if body is None:
            self.close_connection = True
            return self._send(413, {"error": "body too large"})
        if not key or fence is None:
            self._log(key, fence, 400)
            return self._send(400, {"error": "an Idempotency-Key and a numeric token are needed"})
        try:
            payload = json.loads(body)
        except ValueError:
            self._log(key, fence, 400)
            return self._send(400, {"error": "the body is not JSON"})
        if self.server.delay:
            time.sleep(self.server.delay)
        rule = self.server.faults.take(key)
        if rule and self._fault(key, fence, rule):
            return
        self._apply(key, fence, body, payload, rule)

    def _apply(self, key, fence, body, payload, rule):
        store = self.server.store
        body_hash = hashlib.sha256(body).hexdigest()
        with store.lock(key):
            if not store.see_fence(key, fence):
                status, answer = 409, {"error": "fenced: a newer claim holds this key",
                                       "token": fence, "highest": store.fences[key]}
                replayed = False
            elif key in store.applied:
                got = store.applied[key]
                replayed = got["hash"] == body_hash
                status, answer = (201, got["answer"]) if replayed else (
                    422, {"error": "this key was used with another body"})
            else:
                status, answer, replayed = 201, store.apply(key, fence, body_hash, payload), False
        fault = rule["fault"] if rule else None
        self._log(key, fence, status, fault)
        if fault == "drop":
            return self._close(False)  # applied, the answer lost
        if fault == "hang-after":
            time.sleep(float(rule.get("seconds", 3)))
        headers = [("Idempotent-Replayed", "true")] if replayed else []
        try:
            self._send(status, answer, headers)
        except OSError:
            pass  # the client gave up waiting (a hang): the effect stands


def urllib_unquote(s):
    return unquote_to_bytes(s).decode("utf-8", "surrogateescape")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:8080", help="host:port")
    ap.add_argument("--path", default="/payments", help="the collection's path")
    ap.add_argument("--journal", help="file of JSON lines: the state, and every effect")
    ap.add_argument("--faults", help="file of fault rules (see above)")
    ap.add_argument("--log", help="file of one JSON line per request")
    ap.add_argument("--delay-ms", type=float, default=0, help="answer every POST after this")
    ap.add_argument("--key-header", default="Idempotency-Key")
    ap.add_argument("--fence-header", default="Dedupd-Fence")
    ap.add_argument("--auth-env", help="the environment variable holding the bearer token "
                    "every POST and GET must carry (Authorization: Bearer TOKEN)")
    ap.add_argument("--tls-cert", help="PEM certificate (and key) to serve HTTPS")
    ap.add_argument("--tls-key")
    ap.add_argument("--tls-client-ca", help="require client certificates signed by this CA")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    srv = Server((host, int(port)), Handler)
    if args.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args.tls_client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.base = args.path.rstrip("/")
    srv.store = Store(args.journal)
    srv.faults = Faults(args.faults)
    srv.reqlog = open(args.log, "a", encoding="utf-8", buffering=1) if args.log else None
    srv.reqlog_mu = threading.Lock()
    srv.delay = args.delay_ms / 1000.0
    srv.auth = os.environ.get(args.auth_env) if args.auth_env else None
    srv.key_header = args.key_header
    srv.fence_header = args.fence_header
    print("listening on %s:%d" % srv.server_address[:2], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
