#!/usr/bin/env python3
"""Every option of every command is in dedupd(1), and every option dedupd(1)
lists for a command is one the command takes.

A command's options come from its --help, whose Options section is made
from the command's option table (src/dd_cmd_opts.c): an option added to the
table and not to the man page, or left in the man page after leaving the
table, fails here. In man/dedupd.1 a command is a top-level .TP entry of
COMMANDS whose first word is its name; its options are the .TP entries
after it, up to the next command, whose line starts with an option
(".B \\-\\-apply", ".BI \\-\\-from \" position\"", ".BR \\-h \", \" \\-\\-help").
-c/--config and -h/--help, which every command takes, are left out.

    cli_opts_man.py DEDUPD SRC_DIR
"""
import re
import subprocess
import sys

COMMON = {"-c", "--config", "-h", "--help"}
OPT = r"(--?[a-zA-Z][\w-]*)"


def run(*args):
    return subprocess.run([sys.argv[1], *args], capture_output=True, text=True, timeout=30).stdout


def help_options(name):
    text = run(name, "--help")
    section = re.search(r"^Options:\n((?:  .*\n)+)", text, re.M).group(1)
    heads = re.findall(r"^  (-[^ ].*?)(?:  |$)", section, re.M)
    return {o for h in heads for o in re.findall(r"(?:^|, )(--?[a-zA-Z][\w-]*)", h)} - COMMON


def man_options(path):
    """{command: set of options} of the COMMANDS section."""
    text = open(path).read()
    section = text.split("\n.SH COMMANDS\n")[1].split("\n.SH ")[0]
    lines = section.split("\n")
    found, cmd = {}, None
    for prev, line in zip(lines, lines[1:]):
        if prev != ".TP":
            continue
        m = re.match(r"\.B[IR]? ([a-z][a-z\\-]*)(?:\s|$)", line)
        if m:
            cmd = m.group(1).replace("\\-", "-")
            found[cmd] = set()
        elif cmd and re.match(r"\.B[IR]? \\-", line):
            words = re.sub(r'\\f[BIRP]|"', "", line.replace("\\-", "-"))
            found[cmd] |= set(re.findall(r"(?:^\.B[IR]? |,\s*)" + OPT, words)) - COMMON
    return found


def main():
    usage = run("--help")
    commands = re.findall(r"^  ([a-z][a-z-]*) ",
                          usage.split("Commands:")[1].split("Options:")[0], re.M)
    commands = [c for c in commands if c != "help"]
    man = man_options(sys.argv[2] + "/man/dedupd.1")
    failures = 0
    for name in commands:
        have = help_options(name)
        listed = man.get(name)
        if listed is None:
            print("not ok - %s: no entry in the COMMANDS of man/dedupd.1" % name)
            failures += 1
            continue
        missing, stale = sorted(have - listed), sorted(listed - have)
        if missing or stale:
            print("not ok - %s: man/dedupd.1 lacks %s; lists %s, which the command does not take"
                  % (name, missing or "nothing", stale or "nothing"))
            failures += 1
        else:
            print("ok - %s: %d option(s), the same in --help and man/dedupd.1"
                  % (name, len(have)))
    print("1..%d" % len(commands))
    return 1 if failures else 0


sys.exit(main())
