#!/usr/bin/env python3
"""Parsers and checks behind scripts/check-deploy.

The deployment kit (deploy/, man/) repeats facts the code owns: the config
path the image runs with, the metrics port, the shutdown timeout, every
setting of the schema table. This helper reads the kit's formats (libconfig,
Dockerfile, Kubernetes YAML, rendered man pages) so the bash driver can hold
them against the build. Each check command prints "ok   ..." / "FAIL ..."
lines and exits with the number of failures (capped at 100).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

FAILED = 0


def ok(msg):
    print("ok   " + msg)


def fail(msg):
    global FAILED
    FAILED += 1
    print("FAIL " + msg)


def check(cond, good, bad):
    if cond:
        ok(good)
    else:
        fail(bad)
    return cond


# ---- libconfig (the subset dedupd's files use; @include is not followed) ----

_TOKEN = re.compile(r'''
    (?P<ws>\s+|\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)L{0,2})
  | (?P<name>[A-Za-z*][-A-Za-z0-9_*]*)
  | (?P<punct>[=:;,{}\[\]()])
''', re.S | re.X)


def libconfig_parse(text):
    """Returns the settings as nested dicts (lists for arrays and lists)."""
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError("libconfig: cannot parse at %r" % text[pos:pos + 30])
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group()))
    toks.append(("end", ""))
    i = 0

    def value():
        nonlocal i
        kind, tok = toks[i]
        i += 1
        if kind == "str":
            s = json.loads(tok)
            while toks[i][0] == "str":  # adjacent strings concatenate
                s += json.loads(toks[i][1])
                i += 1
            return s
        if kind == "num":
            t = tok.rstrip("L")
            return int(t, 0) if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)", t) else float(t)
        if kind == "name" and tok.lower() in ("true", "false"):
            return tok.lower() == "true"
        if tok == "{":
            d = settings("}")
            i += 1
            return d
        if tok in ("[", "("):
            close = "]" if tok == "[" else ")"
            items = []
            while toks[i][1] != close:
                items.append(value())
                if toks[i][1] == ",":
                    i += 1
            i += 1
            return items
        raise ValueError("libconfig: unexpected %r" % tok)

    def settings(close):
        nonlocal i
        d = {}
        while toks[i][1] != close and toks[i][0] != "end":
            kind, name = toks[i]
            if kind != "name" or toks[i + 1][1] not in ("=", ":"):
                raise ValueError("libconfig: expected a setting, got %r" % name)
            i += 2
            d[name] = value()
            if toks[i][1] in (";", ","):
                i += 1
        return d

    out = settings("")
    if toks[i][0] != "end":
        raise ValueError("libconfig: unexpected %r" % toks[i][1])
    return out


def conf_get(conf, path):
    node = conf
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def duration_ms(v):
    """A dedupd duration ("1h30m", "250ms", 30, "30") in milliseconds."""
    if isinstance(v, int):
        return v * 1000
    if re.fullmatch(r"\d+", v):
        return int(v) * 1000
    units = {"d": 86400000, "h": 3600000, "m": 60000, "s": 1000, "ms": 1}
    parts = re.findall(r"(\d+)(ms|d|h|m|s)", v)
    if not parts or "".join(n + u for n, u in parts) != v:
        raise ValueError("not a duration: %r" % v)
    return sum(int(n) * units[u] for n, u in parts)


def listen_port(listen):
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


# ---- Dockerfile ----

def dockerfile_parse(path):
    """Instructions as (stage index, INSTRUCTION, argument text); continuation
    lines joined and comment lines inside them dropped, as Docker does."""
    stages, out, cur = -1, [], ""
    for raw in open(path).read().splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if cur and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        instr, _, args = cur.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stages += 1
        out.append((stages, instr, args.strip()))
        cur = ""
    return out


def apt_packages(run_args):
    """Package names of every `apt-get install` in one RUN line."""
    pkgs = []
    for cmd in re.split(r"&&|;|\|\|", run_args):
        words = shlex.split(cmd)
        if len(words) >= 2 and words[0] in ("apt-get", "apt") and "install" in words:
            rest = words[words.index("install") + 1:]
            pkgs += [w for w in rest if not w.startswith("-")]
    return pkgs


def cmd_containerfile(a):
    """Static checks of the container recipe; prints the facts the driver
    needs as KEY=VALUE lines on the file named by --facts."""
    instrs = dockerfile_parse(a.file)
    name = os.path.relpath(a.file)
    froms = [args for st, ins, args in instrs if ins == "FROM"]
    check(len(froms) >= 2, "%s: %d stages" % (name, len(froms)),
          "%s: expected a build stage and a runtime stage, got %d FROM" % (name, len(froms)))
    base = re.compile(r"^debian:(12|bookworm)-slim\b")
    check(all(base.match(f) for f in froms), "%s: every stage is debian:12-slim" % name,
          "%s: stages must start FROM debian:12-slim (or bookworm-slim): %s" % (name, froms))
    last = len(froms) - 1
    build_runs = " && ".join(args for st, ins, args in instrs if ins == "RUN" and st < last)
    check("scripts/install-deps" in build_runs,
          "%s: the build stage installs its packages with scripts/install-deps" % name,
          "%s: the build stage must run scripts/install-deps (as the suite does)" % name)
    check(not apt_packages(build_runs),
          "%s: no ad-hoc apt-get install list in the build stage" % name,
          "%s: the build stage installs packages by hand (%s); use scripts/install-deps"
          % (name, " ".join(apt_packages(build_runs))))
    check("meson setup" in build_runs and "meson install" in build_runs,
          "%s: the build stage runs meson setup and meson install" % name,
          "%s: the build stage must build with meson setup + meson install" % name)
    prefix = re.search(r"--prefix[= ](\S+)", build_runs)
    libdir = re.search(r"--libdir[= ](\S+)", build_runs)
    prefix = prefix.group(1) if prefix else "/usr/local"
    libdir = libdir.group(1) if libdir else "lib/x86_64-linux-gnu"
    libdir = libdir if libdir.startswith("/") else prefix + "/" + libdir

    rt = [(ins, args) for st, ins, args in instrs if st == last]
    pkgs = []
    for ins, args in rt:
        if ins == "RUN":
            pkgs += apt_packages(args)
    want = set(a.packages.split())
    have = set(pkgs) - set(a.allow_extra.split())
    check(have == want, "%s: runtime packages match the binaries' libraries: %s"
          % (name, " ".join(sorted(have))),
          "%s: runtime apt-get install list %s differs from the packages of the libraries "
          "the binaries need (%s): missing %s, extra %s"
          % (name, sorted(have), " ".join(sorted(want)), sorted(want - have),
             sorted(have - want)))
    check(any(ins == "COPY" and "--from=" in args for ins, args in rt),
          "%s: the runtime stage copies the installed tree from the build stage" % name,
          "%s: the runtime stage must COPY --from the build stage" % name)

    def one(instr):
        vals = [args for ins, args in rt if ins == instr]
        return vals[-1] if vals else None

    user = one("USER") or ""
    uid = user.split(":")[0]
    check(uid.isdigit() and int(uid) != 0, "%s: USER %s (numeric, not root)" % (name, user),
          "%s: USER must be a numeric non-root uid (runAsNonRoot checks it), got %r"
          % (name, user))
    check(one("STOPSIGNAL") == "SIGTERM", "%s: STOPSIGNAL SIGTERM" % name,
          "%s: STOPSIGNAL must be SIGTERM (dedupd's clean shutdown), got %r"
          % (name, one("STOPSIGNAL")))
    expose = (one("EXPOSE") or "").split()
    check(str(a.port) in [e.split("/")[0] for e in expose],
          "%s: EXPOSE %d, the port of the default config's http.listen" % (name, a.port),
          "%s: EXPOSE %s, but config/dedupd.conf listens on %d" % (name, expose, a.port))
    entry = json.loads(one("ENTRYPOINT") or "null")
    check(entry in (["dedupd"], [prefix + "/bin/dedupd"]),
          "%s: ENTRYPOINT %s" % (name, entry),
          "%s: ENTRYPOINT must be [\"dedupd\"], got %r" % (name, entry))
    cmd = json.loads(one("CMD") or "null")
    good = isinstance(cmd, list) and len(cmd) == 3 and cmd[:2] == ["run", "-c"]
    check(good, "%s: CMD %s" % (name, cmd),
          "%s: CMD must be [\"run\", \"-c\", CONFIG], got %r" % (name, cmd))
    hc = one("HEALTHCHECK") or ""
    m = re.search(r"\bCMD\s+(\[.*\])\s*$", hc)
    probe = json.loads(m.group(1)) if m else None
    check(probe is not None and "/healthz" in " ".join(probe) and
          str(a.port) in " ".join(probe),
          "%s: HEALTHCHECK probes /healthz on port %d" % (name, a.port),
          "%s: HEALTHCHECK must be an exec-form CMD probing /healthz on port %d, got %r"
          % (name, a.port, hc))
    with open(a.facts, "w") as f:
        f.write("CONFIG=%s\n" % (cmd[2] if good else ""))
        f.write("PREFIX=%s\nLIBDIR=%s\nIMAGE_UID=%s\n" % (prefix, libdir, uid))
        f.write("PROBE=%s\n" % shlex.quote(json.dumps(probe)))


# ---- Kubernetes ----

def k8s_docs(directory):
    import yaml
    docs = []
    for fn in sorted(os.listdir(directory)):
        if fn.endswith((".yaml", ".yml")):
            path = os.path.join(directory, fn)
            try:
                loaded = [d for d in yaml.safe_load_all(open(path)) if d]
                ok("%s parses (%s)" % (os.path.relpath(path),
                                       ", ".join(d.get("kind", "?") for d in loaded)))
                docs += [(path, d) for d in loaded]
            except yaml.YAMLError as e:
                fail("%s does not parse: %s" % (os.path.relpath(path), e))
    return docs


def probe_port(probe, ports):
    port = ((probe or {}).get("httpGet") or {}).get("port")
    return ports.get(port, port)


def cmd_kubernetes(a):
    docs = k8s_docs(a.dir)
    cms = {d["metadata"]["name"]: d for _, d in docs if d.get("kind") == "ConfigMap"}
    deps = [d for _, d in docs if d.get("kind") == "Deployment"]
    if not check(len(deps) == 1, "one Deployment", "expected one Deployment, got %d" % len(deps)):
        return
    dep = deps[0]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    ctrs = {c["name"]: c for c in spec.get("containers", [])}
    c = ctrs.get("dedupd")
    if not check(c is not None and len(ctrs) >= 2,
                 "Deployment %s: dedupd is a sidecar next to %s"
                 % (dep["metadata"]["name"], ", ".join(n for n in ctrs if n != "dedupd")),
                 "Deployment must have a container named dedupd next to the app's"):
        return
    args = c.get("args")
    check(c.get("command") is None and args in (None, ["run", "-c", a.config]),
          "dedupd runs the image's ENTRYPOINT with run -c %s" % a.config,
          "dedupd's command/args must be the image's (run -c %s), got %r / %r"
          % (a.config, c.get("command"), args))
    vols = {v["name"]: v for v in spec.get("volumes", [])}

    def mounted_file(container, path):
        """(volume, key) of the file at path in container, or (None, None)."""
        for vm in container.get("volumeMounts", []):
            mp = vm["mountPath"].rstrip("/")
            v = vols.get(vm["name"], {})
            src = v.get("configMap") or v.get("secret")
            if src is None:
                continue
            if vm.get("subPath") and mp == path:
                return v, vm["subPath"]
            if not vm.get("subPath") and os.path.dirname(path) == mp:
                name = os.path.basename(path)
                items = src.get("items")
                if items is None:
                    return v, name
                for it in items:
                    if it["path"] == name:
                        return v, it["key"]
        return None, None

    v, key = mounted_file(c, a.config)
    cm = cms.get(((v or {}).get("configMap") or {}).get("name"))
    text = (cm or {}).get("data", {}).get(key) if cm else None
    if not check(text is not None,
                 "%s is the ConfigMap %s's %s" % (a.config, (cm or {}).get("metadata", {}).get("name"), key),
                 "%s is not mounted from a ConfigMap in these files" % a.config):
        return
    with open(a.extract, "w") as f:
        f.write(text)
    try:
        conf = libconfig_parse(text)
    except ValueError as e:
        fail("the ConfigMap's dedupd.conf: %s" % e)
        return
    env = {e["name"]: e.get("value") for e in c.get("env", [])}

    def setting(path, default=None):
        """The value dedupd runs with: the container's env, else the file."""
        var = "DEDUPD_" + path.upper().replace(".", "_")
        if var in env:
            return env[var]
        value = conf_get(conf, path)
        return default if value is None else value

    listen = setting("http.listen")
    if not check(listen is not None, "http.listen is %s" % listen,
                 "the ConfigMap's config must set http.listen for the probes"):
        return
    host, port = listen_port(listen)
    check(host in ("0.0.0.0", "::", ""), "http.listen is reachable from the kubelet (%s)" % host,
          "http.listen %s only listens on %s: probes and scrapes come from outside the pod"
          % (listen, host))
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    check(port in ports.values(), "dedupd's containerPort %d is http.listen's" % port,
          "dedupd's containerPorts %s do not include http.listen's %d"
          % (sorted(ports.values()), port))
    live, ready = c.get("livenessProbe") or {}, c.get("readinessProbe") or {}
    check((live.get("httpGet") or {}).get("path") == "/healthz" and probe_port(live, ports) == port,
          "livenessProbe: GET /healthz on %d" % port,
          "livenessProbe must GET /healthz on port %d, got %r" % (port, live))
    check((ready.get("httpGet") or {}).get("path") == "/readyz" and probe_port(ready, ports) == port,
          "readinessProbe: GET /readyz on %d" % port,
          "readinessProbe must GET /readyz on port %d, got %r" % (port, ready))
    ann = pod.get("metadata", {}).get("annotations", {})
    want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics"}
    check(all(ann.get(k) == v for k, v in want.items()),
          "Prometheus annotations: scrape, port %d, /metrics" % port,
          "pod annotations must be %r, got %r" % (want, {k: ann.get(k) for k in want}))
    st = setting("shutdown_timeout", a.shutdown_default)
    st_s = duration_ms(st) / 1000.0
    grace = spec.get("terminationGracePeriodSeconds", 30)
    check(grace >= st_s + a.margin,
          "terminationGracePeriodSeconds %s >= shutdown_timeout %s + %ds"
          % (grace, st, a.margin),
          "terminationGracePeriodSeconds %s must exceed shutdown_timeout (%s) by %d s "
          "(final commit, leaving the group, dead-letter flush)" % (grace, st, a.margin))
    pw = setting("mysql.password_file")
    if check(pw is not None, "mysql.password_file is %s" % pw,
             "the ConfigMap's config must read the password from mysql.password_file"):
        pw = pw if pw.startswith("/") else os.path.join(os.path.dirname(a.config), pw)
        v, key = mounted_file(c, pw)
        check(v is not None and "secret" in v,
              "%s is the Secret %s's %s" % (pw, (v or {}).get("secret", {}).get("secretName"), key),
              "%s is not mounted from a Secret into dedupd" % pw)
    hp = setting("handler.path")
    check(hp == a.handler, "handler.path %s is the example handler in the image" % hp,
          "handler.path %r is not the image's example handler %s" % (hp, a.handler))
    psc = spec.get("securityContext", {})
    sc = dict(psc, **c.get("securityContext", {}))
    good = (sc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True and
            sc.get("allowPrivilegeEscalation") is False and
            "ALL" in (sc.get("capabilities") or {}).get("drop", []) and
            str(sc.get("runAsUser", a.uid)) == a.uid)
    check(good, "dedupd's securityContext: non-root (%s), read-only root, no privilege "
          "escalation, all capabilities dropped" % a.uid,
          "dedupd's securityContext must set runAsNonRoot, readOnlyRootFilesystem, "
          "allowPrivilegeEscalation: false, drop ALL and the image's uid %s, got %r" % (a.uid, sc))
    res = c.get("resources", {})
    check(all(k in res.get("requests", {}) for k in ("cpu", "memory")) and
          "memory" in res.get("limits", {}),
          "dedupd's resources: requests %s, limits %s" % (res.get("requests"), res.get("limits")),
          "dedupd needs cpu and memory requests and a memory limit, got %r" % res)
    for ic in spec.get("initContainers", []):
        if ic.get("image") == c.get("image"):
            check(ic.get("args", [None])[-2:] == ["-c", a.config] and
                  all(mounted_file(ic, p)[0] is not None for p in (a.config, pw)),
                  "init container %s: %s with the same config and secret"
                  % (ic["name"], " ".join(ic.get("args", []))),
                  "init container %s must use -c %s and mount the config and the secret"
                  % (ic["name"], a.config))


# ---- systemd unit ----

def unit_values(path, key):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith(key + "="):
            out.append(line[len(key) + 1:])
    return out


def cmd_unit(a):
    name = os.path.relpath(a.file)
    execs = unit_values(a.file, "ExecStart") + unit_values(a.file, "ExecStartPre")
    for e in execs:
        words = shlex.split(e.lstrip("-+!@:"))
        check(words[0] == a.binary and words[-2:] == ["-c", a.config],
              "%s: %s" % (name, e),
              "%s: %r must run %s with -c %s (the image's install prefix and config path)"
              % (name, e, a.binary, a.config))
    stop = unit_values(a.file, "TimeoutStopSec")
    st = duration_ms(a.shutdown_default) / 1000.0
    stop_s = duration_ms(stop[-1].replace(" ", "").replace("min", "m")) / 1000.0 if stop else 90
    check(stop_s >= st + a.margin,
          "%s: TimeoutStopSec=%s >= shutdown_timeout %s + %ds"
          % (name, stop[-1] if stop else "(default 90s)", a.shutdown_default, a.margin),
          "%s: TimeoutStopSec %s must exceed shutdown_timeout %s by %d s"
          % (name, stop, a.shutdown_default, a.margin))
    types, wd = unit_values(a.file, "Type"), unit_values(a.file, "WatchdogSec")
    check(types[-1:] == ["notify"] and wd,
          "%s: Type=notify (READY=1 once partitions are assigned), WatchdogSec=%s" % (name, wd[-1] if wd else ""),
          "%s: Type=%r and WatchdogSec=%r: dedupd run speaks sd_notify, expected Type=notify "
          "and a WatchdogSec" % (name, types, wd))


# ---- man pages ----

def rendered_entries(text):
    """Tagged paragraphs of a man page rendered with a long line length:
    tag (indent 7) -> body (the more indented lines after it, joined)."""
    entries, tag = {}, None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip():
            continue
        if indent == 7:
            tag = line.strip()
            entries[tag] = ""
        elif indent > 7 and tag is not None:
            entries[tag] += " " + line.strip()
        else:
            tag = None
    return entries


def cmd_manconf(a):
    """The SETTINGS section of dedupd.conf(5), between its GENERATED markers,
    is exactly what `dedupd --help-config=man` renders from the schema."""
    page = open(a.page).read()
    want = open(a.generated).read()
    begin = page.find('.\\" BEGIN GENERATED')
    end = page.find('.\\" END GENERATED')
    if begin < 0 or end < begin:
        check(False, "", "%s has no GENERATED block" % a.name)
        return
    block = page[page.index("\n", page.index("\n", begin) + 1) + 1:end]
    check(block == want, "%s: the SETTINGS section is --help-config=man's (%d settings)"
          % (a.name, want.count("\n.TP\n")),
          "%s: the SETTINGS section differs from dedupd --help-config=man; regenerate it"
          % a.name)


def cmd_manhelp(a):
    """Every command and option of the usage texts appears in the page: the
    commands of the main usage, its short options, and the long options of
    every usage (the commands' own texts also mention kcat's options)."""
    text = open(a.rendered).read()
    usages = [open(f).read() for f in a.usage]
    cmds = re.findall(r"^  ([a-z][a-z-]+) ",
                      usages[0].split("Commands:")[1].split("Options:")[0], re.M)
    opts = set(re.findall(r"(?<![\w-])(-[a-zA-Z])(?![\w-])", usages[0]))
    for u in usages:
        opts |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", u))
    entries = rendered_entries(text)
    tags = " ".join(entries)
    no_cmd = [c for c in cmds if not re.search(r"(^| )%s( |$)" % re.escape(c), tags)]
    no_opt = sorted(o for o in opts
                    if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), text))
    check(not no_cmd, "%s: every command (%s)" % (a.name, " ".join(cmds)),
          "%s: commands without an entry: %s" % (a.name, " ".join(no_cmd)))
    check(not no_opt, "%s: every option of the usage texts (%d)" % (a.name, len(opts)),
          "%s: options missing: %s" % (a.name, " ".join(no_opt)))


# ---- install ----

def cmd_installed(a):
    opts = {o["name"]: o["value"] for o in json.loads(subprocess.run(
        ["meson", "introspect", "--buildoptions", a.build], check=True,
        capture_output=True, text=True).stdout)}
    installed = json.loads(subprocess.run(["meson", "introspect", "--installed", a.build],
                                          check=True, capture_output=True, text=True).stdout)
    pre = opts["prefix"]

    def at(opt, rel):
        d = opts[opt]
        return os.path.join(d if d.startswith("/") else os.path.join(pre, d), rel)

    want = [at("bindir", "dedupd"), at("includedir", "dedupd/handler.h"),
            at("mandir", "man1/dedupd.1"), at("mandir", "man5/dedupd.conf.5"),
            at("libdir", "dedupd/ledger.so"), at("libdir", "pkgconfig/dedupd.pc"),
            at("datadir", "dedupd/dedupd.conf.example"), at("datadir", "dedupd/sql/grants.sql"),
            at("datadir", "dedupd/examples/minimal/minimal.c"),
            at("datadir", "dedupd/examples/minimal/meson.build"),
            os.path.join(pre, "lib/systemd/system/dedupd.service")]
    entries = sorted(installed.values())
    absent = [f for f in entries if not os.path.exists(a.destdir + f)]
    # an install_subdir() is one entry, a directory: its files count
    files = []
    for f in entries:
        if not os.path.isdir(a.destdir + f):
            files.append(f)
            continue
        for root, _, names in os.walk(a.destdir + f):
            files += [os.path.join(root, n)[len(a.destdir):] for n in names]
    files.sort()
    check(not absent, "meson install --destdir: %d files, as meson introspect lists them"
          % len(files), "meson install did not install %s" % absent)
    check(all(w in files for w in want), "installs dedupd, handler.h, dedupd.pc, the example "
          "handlers, their sources, the SQL and grants, the example configuration, both "
          "man pages and the systemd unit", "meson install lacks %s" % [w for w in want if w not in files])
    for f in files:
        print("       " + f)
    with open(a.facts, "w") as fh:
        fh.write("INSTALLED_UNIT=%s\n" % os.path.join(pre, "lib/systemd/system/dedupd.service"))
        fh.write("INSTALLED_BIN=%s\nINSTALLED_MAN=%s\nLEDGER_REL=%s\n" % (
            at("bindir", "dedupd"), opts["mandir"] if opts["mandir"].startswith("/")
            else os.path.join(pre, opts["mandir"]),
            os.path.relpath(at("libdir", "dedupd/ledger.so"), at("libdir", ""))))
        fh.write("ELF_FILES=%s\n" % shlex.quote(" ".join(
            f for f in files if open(a.destdir + f, "rb").read(4) == b"\x7fELF")))


# ---- a stand-in for /healthz ----

def cmd_probe_server(a):
    """Answers GET /healthz with the given status and anything else with 404;
    prints its port, then serves until killed."""
    import http.server

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = a.status if self.path == "/healthz" else 404
            self.send_response(code)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")

        def log_message(self, *args):
            pass

    class Server(http.server.HTTPServer):
        def handle_error(self, request, client_address):
            pass  # a probe that hangs up after the status line is fine

    srv = Server(("127.0.0.1", 0), H)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("conf", help="print settings of a libconfig file, one per line")
    s.add_argument("file")
    s.add_argument("paths", nargs="+")
    s = sub.add_parser("containerfile")
    s.add_argument("file")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--packages", required=True)
    s.add_argument("--allow-extra", default="")
    s.add_argument("--facts", required=True)
    s = sub.add_parser("kubernetes")
    s.add_argument("dir")
    for o in ("--config", "--shutdown-default", "--handler", "--uid", "--extract"):
        s.add_argument(o, required=True)
    s.add_argument("--margin", type=int, default=10)
    s = sub.add_parser("unit")
    s.add_argument("file")
    for o in ("--binary", "--config", "--shutdown-default"):
        s.add_argument(o, required=True)
    s.add_argument("--margin", type=int, default=10)
    s = sub.add_parser("manconf")
    s.add_argument("page")
    s.add_argument("generated")
    s.add_argument("--name", required=True)
    s = sub.add_parser("manhelp")
    s.add_argument("rendered")
    s.add_argument("usage", nargs="+")
    s.add_argument("--name", required=True)
    s = sub.add_parser("installed")
    s.add_argument("build")
    s.add_argument("destdir")
    s.add_argument("--facts", required=True)
    s = sub.add_parser("probe-server")
    s.add_argument("status", type=int)
    a = p.parse_args()
    if a.cmd == "conf":
        conf = libconfig_parse(open(a.file).read())
        for path in a.paths:
            v = conf_get(conf, path)
            print("" if v is None else json.dumps(v) if isinstance(v, (list, dict, bool)) else v)
        return 0
    globals()["cmd_" + a.cmd.replace("-", "_")](a)
    return min(FAILED, 100)


if __name__ == "__main__":
    sys.exit(main())
