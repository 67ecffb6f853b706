#!/usr/bin/python3
"""A Confluent Schema Registry for tests: the REST calls dedupd and producers make.

    mock-registry.py --port-file FILE [--fault-file FILE] [--log FILE]
                     [--user U --password P] [--cert PEM --key PEM [--client-ca PEM]]

Serves, in memory:
  POST /subjects/{subject}/versions   {"schema": "...", "references": [...]}
      -> {"id": N} (the same schema text and references, under any
      subject, get the same id, as the real registry does; ids start at 1;
      each subject's versions count from 1)
  GET  /schemas/ids/{id}             -> {"schema": "..."} with "references":
      [{"name", "subject", "version"}] when it has some, or 404 with
      {"error_code": 40403, "message": "Schema N not found"}
  GET  /subjects/{subject}/versions/{version}   (a number, or latest)
                                     -> {"subject", "version", "id", "schema"}
      (and "references"), or 404 with error code 40401 or 40402
  GET  /subjects                      -> the subjects
  POST /admin/rebuild                 forgets every schema, id and subject:
      a registry rebuilt without its ids (the next schema registered gets
      id 1 again)

Listens on 127.0.0.1 on a free port and writes it to --port-file once
ready. Fault injection for GET /schemas/ids/* (registration always works),
read from --fault-file on every request (missing or empty: ok):
  down         the connection is closed without an answer
  slow SECS    the answer comes after SECS seconds
  trickle SECS the answer's headers, then its body one byte a second for
               SECS seconds (30 by default), then the rest
  error        503 with a registry error body
  notfound     404 with error code 40403, for every id
  html         200 with an HTML maintenance page
Every GET /schemas/ids/{id} is appended to --log as "GET <id> <fault>",
every GET of a subject's version as "SUBJECT <subject> <version>".
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
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SCHEMAS = {}    # id -> (schema text, references)
IDS = {}        # (schema text, references as JSON) -> id
SUBJECTS = {}   # subject -> [ids], version N at index N-1
ARGS = None
MAINTENANCE = b"<html><head><title>503</title></head><body><h1>Down for maintenance</h1>" \
    b"<p>Back soon.</p></body></html>\n"


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

    def log_line(self, line):
        if ARGS.log:
            with LOCK, open(ARGS.log, 'a') as log:
                log.write(line + '\n')

    def do_POST(self):
        length = int(self.headers.get('Content-Length', '0'))
        raw = self.rfile.read(length)
        if self.path == '/admin/rebuild':
            with LOCK:
                SCHEMAS.clear()
                IDS.clear()
                SUBJECTS.clear()
            self.answer(200, {})
            return
        m = re.fullmatch(r'/subjects/([^/]+)/versions', self.path)
        body = json.loads(raw or b'{}')
        if not m or not isinstance(body.get('schema'), str):
            self.answer(422, {'error_code': 42201, 'message': 'Invalid schema'})
            return
        refs = body.get('references') or []
        with LOCK:
            ident = (body['schema'], json.dumps(refs, sort_keys=True))
            if ident not in IDS:
                IDS[ident] = len(SCHEMAS) + 1
                SCHEMAS[IDS[ident]] = (body['schema'], refs)
            versions = SUBJECTS.setdefault(urllib.parse.unquote(m.group(1)), [])
            if IDS[ident] not in versions:
                versions.append(IDS[ident])
            sid = IDS[ident]
        self.answer(200, {'id': sid})

    def schema_answer(self, sid, extra=None):
        text, refs = SCHEMAS[sid]
        out = dict(extra or {}, schema=text)
        if refs:
            out['references'] = refs
        return out

    def subject_version(self, subject, version):
        self.log_line('SUBJECT %s %d' % (subject, version))
        with LOCK:
            versions = SUBJECTS.get(subject)
            if versions is None:
                self.answer(404, {'error_code': 40401, 'message': 'Subject not found.'})
                return
            if not 1 <= version <= len(versions):
                self.answer(404, {'error_code': 40402, 'message': 'Version not found.'})
                return
            sid = versions[version - 1]
            body = self.schema_answer(sid, {'subject': subject, 'version': version, 'id': sid})
        self.answer(200, body)

    def trickle(self, body, secs):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/vnd.schemaregistry.v1+json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        try:
            for i in range(min(secs, len(data) - 1)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                time.sleep(1)
            self.wfile.write(data[min(secs, len(data) - 1):])
        except OSError:
            pass

    def do_GET(self):
        if self.path == '/subjects':
            with LOCK:
                self.answer(200, sorted(SUBJECTS))
            return
        m = re.fullmatch(r'/subjects/([^/]+)/versions/([0-9]+|latest)', self.path)
        if m:
            subject = urllib.parse.unquote(m.group(1))
            with LOCK:
                latest = len(SUBJECTS.get(subject, [])) or 1
            self.subject_version(subject, latest if m.group(2) == 'latest' else int(m.group(2)))
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
        self.log_line('GET %d %s' % (sid, f or 'ok'))
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
        if f == 'html':
            self.send_response(200)
            self.send_header('Content-Type', 'text/html')
            self.send_header('Content-Length', str(len(MAINTENANCE)))
            self.end_headers()
            self.wfile.write(MAINTENANCE)
            return
        with LOCK:
            body = self.schema_answer(sid) if sid in SCHEMAS else None
        if body is None or f == 'notfound':
            self.answer(404, {'error_code': 40403, 'message': 'Schema %d not found' % sid})
            return
        if f.startswith('trickle'):
            self.trickle(body, int(f.split()[1]) if len(f.split()) > 1 else 30)
            return
        self.answer(200, body)


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
