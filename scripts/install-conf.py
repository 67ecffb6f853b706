#!/usr/bin/env python3
"""Writes the installed example configuration from config/dedupd.conf.

    scripts/install-conf.py INPUT OUTPUT HANDLER_PATH

config/dedupd.conf is the example for a source checkout: its handler.path
is the ledger as built in build/. The copy meson installs
(<datadir>/dedupd/dedupd.conf.example) points at the installed ledger
instead, HANDLER_PATH; everything else is the same. Fails unless the input
has exactly one handler path line to replace.
"""
import re
import sys


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, out, handler = sys.argv[1:]
    text = open(src, encoding="utf-8").read()
    pattern = re.compile(r'^(  path = )"[^"]*ledger\.so";', re.M)
    if len(pattern.findall(text)) != 1:
        print("%s: expected one handler path line ending in ledger.so" % src, file=sys.stderr)
        return 1
    text = pattern.sub(lambda m: '%s"%s";' % (m.group(1), handler), text)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
