#!/usr/bin/env python3
"""A fake MySQL server that wants a password in clear text, for test 78.

It speaks just enough of the protocol to be logged in to: the handshake
(offering no TLS, naming PLUGIN as its authentication plugin), then, to
whatever the client answers, an authentication switch to
mysql_clear_password, then an access-denied error. Every packet the client
sends is appended to LOG as one line of hex, so the test can look for the
password in what arrived.

usage: fake-mysql.py PORTFILE LOG PLUGIN
"""
import socket
import struct
import sys
import threading

CAPS = (0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x10000 | 0x20000 | 0x80000 | 0x200000)
SCRAMBLE = b"abcdefgh" + b"ijklmnopqrst"


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def read_packet(conn):
    head = b""
    while len(head) < 4:
        more = conn.recv(4 - len(head))
        if not more:
            return None, None
        head += more
    size = head[0] | head[1] << 8 | head[2] << 16
    body = b""
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            return None, None
        body += more
    return head[3], body


def handshake(plugin):
    return (b"\x0a" + b"5.5.5-10.11.0-fake\x00" + struct.pack("<I", 7) + SCRAMBLE[:8] + b"\x00"
            + struct.pack("<H", CAPS & 0xFFFF) + b"\x2d" + struct.pack("<H", 2)
            + struct.pack("<H", CAPS >> 16) + bytes([len(SCRAMBLE) + 1]) + b"\x00" * 10
            + SCRAMBLE[8:] + b"\x00" + plugin.encode() + b"\x00")


def serve(conn, log, plugin, lock):
    try:
        conn.sendall(packet(0, handshake(plugin)))
        seq, body = read_packet(conn)
        if body is None:
            return
        with lock, open(log, "a") as f:
            f.write("response %s\n" % body.hex())
        conn.sendall(packet(seq + 1, b"\xfe" + b"mysql_clear_password\x00"))
        seq, body = read_packet(conn)
        if body is not None:
            with lock, open(log, "a") as f:
                f.write("switched %s\n" % body.hex())
            conn.sendall(packet(seq + 1, b"\xff" + struct.pack("<H", 1045) + b"#28000"
                                + b"Access denied (fake server)"))
    finally:
        conn.close()


def main():
    portfile, log, plugin = sys.argv[1:4]
    lock = threading.Lock()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        conn, _ = srv.accept()
        conn.settimeout(10)
        threading.Thread(target=serve, args=(conn, log, plugin, lock), daemon=True).start()


if __name__ == "__main__":
    main()
