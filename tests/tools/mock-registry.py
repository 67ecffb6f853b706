#!/usr/bin/python3
"""A Confluent Schema Registry for tests: the REST calls dedupd and producers make.

    mock-registry.py --port-file FILE [--fault-file FILE] [--log FILE]
                     [--user U --password P] [--cert PEM --key PEM [--client-ca PEM]]

Serves, in memory:
  POST /subjects/{subject}/versions   {"schema": "..."}  -> {"id": N}
      (the same schema text, under any subject, gets the same id, as the
      real registry does; ids start at 1)
  GET  /schemas/ids/{id}             -> {"schema": "..."}, or 404 with
      {"error_code": 40403, "message": "Schema N not found"}
  GET  /subjects                      -> the subjects

Listens on 127.0.0.1 on a free port and writes it to --port-file once
ready. Fault injection for GET /schemas/ids/* (registration always works),
read from --fault-file on every request (missing or empty: ok):
  down        the connection is closed without an answer
  slow SECS   the answer comes after SECS seconds
  error       503 with a registry error body
  notfound    404 with error code 40403, for every id
Every GET /schemas/ids/{id} is appended to --log as "GET <id> <fault>".
With --user and --password, schema fetches need HTTP basic authentication
with them (401 otherwise, logged as fault "unauthorized"); with --cert and
--key, it serves HTTPS, and with --client-ca too, only to clients whose
certificate that CA signed (no handshake otherwise).
"""
import argparse
import base64
import json
import ssl
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SCHEMAS = {}    # id -> schema text
IDS = {}        # schema text -> id
SUBJECTS = {}   # subject -> [ids]
ARGS = None


def fault():
    try:
        with open(ARGS.fault_file) as f:
            return f.read().strip()
    except (OSError, TypeError):
        return ''


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/vnd.schemaregistry.v1+json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        m = re.fullmatch(r'/subjects/([^/]+)/versions', self.path)
        length = int(self.headers.get('Content-Length', '0'))
        body = json.loads(self.rfile.read(length) or b'{}')
        if not m or not isinstance(body.get('schema'), str):
            self.answer(422, {'error_code': 42201, 'message': 'Invalid schema'})
            return
        with LOCK:
            text = body['schema']
            if text not in IDS:
                IDS[text] = len(SCHEMAS) + 1
                SCHEMAS[IDS[text]] = text
            SUBJECTS.setdefault(m.group(1), []).append(IDS[text])
            sid = IDS[text]
        self.answer(200, {'id': sid})

    def do_GET(self):
        if self.path == '/subjects':
            with LOCK:
                self.answer(200, sorted(SUBJECTS))
            return
        m = re.fullmatch(r'/schemas/ids/([0-9]+)', self.path)
        if not m:
            self.answer(404, {'error_code': 404, 'message': 'HTTP 404 Not Found'})
            return
        sid, f = int(m.group(1)), fault()
        if ARGS.user is not None:
            want = 'Basic ' + base64.b64encode(('%s:%s' % (ARGS.user, ARGS.password)).encode()).decode()
            if self.headers.get('Authorization') != want:
                f = 'unauthorized'
        if ARGS.log:
            with LOCK, open(ARGS.log, 'a') as log:
                log.write('GET %d %s\n' % (sid, f or 'ok'))
        if f == 'down':
            self.close_connection = True
            self.connection.close()
            return
        if f.startswith('slow'):
            time.sleep(float(f.split()[1]) if len(f.split()) > 1 else 30)
        if f == 'unauthorized':
            self.answer(401, {'error_code': 401, 'message': 'Unauthorized'})
            return
        if f == 'error':
            self.answer(503, {'error_code': 50302, 'message': 'Store is not available'})
            return
        with LOCK:
            text = SCHEMAS.get(sid)
        if text is None or f == 'notfound':
            self.answer(404, {'error_code': 40403, 'message': 'Schema %d not found' % sid})
            return
        self.answer(200, {'schema': text})


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--port-file', required=True)
    p.add_argument('--fault-file')
    p.add_argument('--log')
    p.add_argument('--user')
    p.add_argument('--password')
    p.add_argument('--cert')
    p.add_argument('--key')
    p.add_argument('--client-ca')
    ARGS = p.parse_args()
    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        if ARGS.client_ca:  # a client certificate of that CA, or no handshake
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(ARGS.client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    with open(ARGS.port_file + '.tmp', 'w') as f:
        f.write('%d\n' % server.server_address[1])
    import os
    os.rename(ARGS.port_file + '.tmp', ARGS.port_file)
    server.serve_forever()


if __name__ == '__main__':
    main()
