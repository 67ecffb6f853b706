#!/usr/bin/env python3
"""The help of every command has one layout, so an operator (and a script)
finds the same things in the same places:

    usage: dedupd NAME ...        (continued on indented lines)
                                  (a blank line)
    What it does, in a paragraph.
                                  (a blank line)
    Options:
      -c, --config FILE   ...     every option of the usage lines explained,
      -h, --help          ...     -h/--help among them
                                  (other sections may follow)
    Exit status:
      0  what 0 means             one line per code, ascending; 0 and 2 always

`dedupd help NAME` and `dedupd NAME --help` print it and exit 0; the main
usage lists every command and the exit codes; dedupd(1) has every exit code
of every help in its EXIT STATUS section.

    cli_help.py DEDUPD SRC_DIR
"""
import re
import subprocess
import sys

dedupd, src = sys.argv[1], sys.argv[2]
failures = []


def fail(what):
    failures.append(what)
    print("not ok - " + what)


def ok(what):
    print("ok - " + what)


def run(*args):
    p = subprocess.run([dedupd, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def exit_codes(text, name):
    """The codes of the "Exit status:" section, or None."""
    m = re.search(r"^Exit status:\n((?:  .*\n)+)", text, re.M)
    if not m:
        fail("%s: no 'Exit status:' section with one '  N  meaning' line per code" % name)
        return None
    codes = []
    for line in m.group(1).splitlines():
        c = re.match(r"  (\d+)  \S", line)
        if c:
            codes.append(int(c.group(1)))
        elif not re.match(r"     +\S", line):  # a continued meaning is indented further
            fail("%s: exit status line %r is not '  N  meaning'" % (name, line))
    if codes != sorted(set(codes)) or 0 not in codes or 2 not in codes:
        fail("%s: exit codes %s: ascending, each once, 0 and 2 among them" % (name, codes))
    return codes


def check_command(name):
    before = len(failures)
    rc, text, err = run("help", name)
    if rc != 0 or not text or err:
        fail("dedupd help %s: exit %d, stderr %r" % (name, rc, err))
        return []
    rc2, text2, _ = run(name, "--help")
    if rc2 != 0 or text2 != text:
        fail("dedupd %s --help: exit %d, same text as dedupd help %s: %s"
             % (name, rc2, name, text2 == text))
    m = re.match(r"usage: dedupd %s\b.*\n((?: +\S.*\n)*)\n" % re.escape(name), text)
    if not m:
        fail("%s: does not open with 'usage: dedupd %s ...' lines and a blank line"
             % (name, name))
        return []
    usage = text[:m.end()]
    rest = text[m.end():]
    desc = re.match(r"(\S.*\n)+\n", rest)
    if not desc or desc.group(0).startswith("Options:"):
        fail("%s: no description paragraph after the usage" % name)
    opts = re.search(r"^Options:\n((?:  .*\n)+)", text, re.M)
    if not opts:
        fail("%s: no 'Options:' section" % name)
        return []
    # An option is explained where an entry of the section names it: at the
    # start of a line ("  --apply ..." or "  -c, --config FILE ...").
    entries = " ".join(re.findall(r"^  (-[^ ].*?)(?:   |$)", opts.group(1), re.M))
    named = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", entries))
    used = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage))
    missing = sorted(used - named)
    if missing:
        fail("%s: options of the usage not explained under Options: %s" % (name, missing))
    if "-h" not in named or "--help" not in named:
        fail("%s: Options has no -h, --help entry" % name)
    codes = exit_codes(text, name) or []
    if len(failures) == before:
        ok("%s: usage, description, %d option(s) explained, exit codes %s"
           % (name, len(named), codes))
    return codes


rc, main, err = run("--help")
rc2, main2, _ = run("help")
if rc != 0 or rc2 != 0 or main != main2:
    fail("dedupd --help and dedupd help: exit 0 and the same text (%d, %d)" % (rc, rc2))
commands = re.findall(r"^  ([a-z][a-z-]*) ", main.split("Commands:")[1].split("Options:")[0],
                      re.M)
commands = [c for c in commands if c != "help"]
if len(commands) < 7:
    fail("the main usage lists %d commands" % len(commands))
all_codes = set(exit_codes(main, "dedupd --help") or [])
for cmd in commands:
    all_codes |= set(check_command(cmd))
missing = sorted(all_codes - set(exit_codes(main, "dedupd --help") or []))
if missing:
    fail("dedupd --help: exit codes of the commands missing from the main usage: %s" % missing)

rc, _, err = run("help", "no-such-command")
if rc != 2:
    fail("dedupd help no-such-command: exit %d, not 2" % rc)

man = open(src + "/man/dedupd.1").read()
section = man.split(".SH EXIT STATUS")[1].split(".SH ")[0]
man_codes = {int(c) for c in re.findall(r"^\.B (\d+)$", section, re.M)}
if all_codes - man_codes:
    fail("man/dedupd.1 EXIT STATUS lacks the codes %s" % sorted(all_codes - man_codes))
else:
    ok("man/dedupd.1 EXIT STATUS has every exit code %s" % sorted(all_codes))

print("1..%d" % (len(commands) + 1))
sys.exit(1 if failures else 0)
