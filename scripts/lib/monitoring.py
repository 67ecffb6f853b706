#!/usr/bin/env python3
"""Checks of the monitoring kit (deploy/prometheus, deploy/grafana, the PodMonitor).

  monitoring.py podmonitor DIR            the PodMonitor of DIR selects the
                                          Deployment's pods and scrapes the
                                          dedupd container's metrics port
  monitoring.py dashboard FILE [--help-metrics TEXT]
                                          the Grafana dashboard parses as JSON,
                                          every panel has a PromQL target; with
                                          TEXT (`dedupd --help-metrics`), every
                                          panel over a series that is not always
                                          there (one TEXT says when, or one it
                                          does not list yet) says why it may be
                                          empty (a noValue text)
  monitoring.py names METRICS FILE... [--pending NAME --src DIR]
                                          every dedupd_* series the rules and
                                          dashboards name is on the /metrics
                                          page METRICS (a scrape of dedupd);
                                          a --pending name (a metric being
                                          added elsewhere) is let off only
                                          while no file of DIR names it

Prints one "ok"/"FAIL" line per check; exits with the number of failures.
"""
import json
import os
import re
import sys

import yaml

FAILED = 0


def check(cond, good, bad):
    global FAILED
    print(("ok   " + good) if cond else ("FAIL " + bad))
    FAILED += 0 if cond else 1
    return cond


def k8s_docs(directory):
    docs = []
    for fn in sorted(os.listdir(directory)):
        if fn.endswith((".yaml", ".yml")):
            with open(os.path.join(directory, fn)) as f:
                docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def cmd_podmonitor(directory):
    docs = k8s_docs(directory)
    pms = [d for d in docs if d.get("kind") == "PodMonitor"]
    deps = [d for d in docs if d.get("kind") == "Deployment"]
    if not check(len(pms) == 1 and len(deps) == 1, "one PodMonitor beside the Deployment",
                 "expected one PodMonitor and one Deployment, got %d and %d" % (len(pms), len(deps))):
        return
    pm, pod = pms[0]["spec"], deps[0]["spec"]["template"]
    want = pm.get("selector", {}).get("matchLabels", {})
    labels = pod["metadata"].get("labels", {})
    check(want and all(labels.get(k) == v for k, v in want.items()),
          "PodMonitor selects the Deployment's pods (%s)" % want,
          "PodMonitor selector %r does not match the pod labels %r" % (want, labels))
    ctr = {c["name"]: c for c in pod["spec"]["containers"]}.get("dedupd", {})
    ports = {p.get("name"): p.get("containerPort") for p in ctr.get("ports", [])}
    for ep in pm.get("podMetricsEndpoints", []):
        check(ep.get("port") in ports and ep.get("path", "/metrics") == "/metrics",
              "PodMonitor scrapes dedupd's port %s (%s) at /metrics" % (ep.get("port"),
                                                                      ports.get(ep.get("port"))),
              "PodMonitor endpoint %r is not the dedupd container's port (%r) at /metrics"
              % (ep, ports))
    ann = pod["metadata"].get("annotations", {})
    check(str(ann.get("prometheus.io/port")) in [str(v) for v in ports.values()],
          "the PodMonitor and the prometheus.io annotations name the same port",
          "prometheus.io/port %r is not one of dedupd's ports %r" % (ann.get("prometheus.io/port"),
                                                                  ports))


def dashboard_exprs(path):
    with open(path) as f:
        d = json.load(f)
    return d, [t["expr"] for p in d.get("panels", []) for t in p.get("targets", [])]


def help_metrics(path):
    """The names `dedupd --help-metrics` lists, and those it says are there
    only sometimes (a "(when)" after the type)."""
    listed, sometimes = set(), set()
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\w+)(\{[^}]*\})? (counter|gauge|histogram)( \(.*\))?$", line.rstrip("\n"))
            if m:
                listed.add(m.group(1))
                if m.group(4):
                    sometimes.add(m.group(1))
    return listed, sometimes


def series_names(expr):
    return set(re.findall(r"(?<![\w:])(dedupd_[a-z0-9_]+)", expr))


def cmd_dashboard(path, help_path=None):
    try:
        d, exprs = dashboard_exprs(path)
    except (OSError, ValueError) as e:
        check(False, "", "%s: not JSON: %s" % (path, e))
        return
    panels = d.get("panels", [])
    check(d.get("title") and panels, "%s: %d panels" % (path, len(panels)),
          "%s: no title or no panels" % path)
    bare = [p.get("title") for p in panels if not [t for t in p.get("targets", []) if t.get("expr")]]
    check(not bare, "%s: every panel has a PromQL target" % path,
          "%s: panels without a query: %s" % (path, bare))
    if not help_path:
        return
    listed, sometimes = help_metrics(help_path)

    def not_always(name):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        base = base if base in listed else name
        return base in sometimes or base not in listed

    silent = []
    for p in panels:
        names = set()
        for t in p.get("targets", []):
            names |= series_names(t.get("expr", ""))
        if [n for n in names if not_always(n)] and \
                not p.get("fieldConfig", {}).get("defaults", {}).get("noValue"):
            silent.append(p.get("title"))
    check(not silent, "%s: every panel over a series not always there says why it may be empty"
          % path, "%s: panels over series not always there, with no noValue text saying when "
          "they have data: %s" % (path, silent))


def names_in(path):
    if path.endswith(".json"):
        exprs = dashboard_exprs(path)[1]
    else:
        with open(path) as f:
            doc = yaml.safe_load(f)
        exprs = [r["expr"] for g in doc.get("groups", []) for r in g.get("rules", [])]
    found = set()
    for e in exprs:
        found |= series_names(e)
    return found


def mentioned(name, src):
    for root, _, fns in os.walk(src):
        for fn in fns:
            with open(os.path.join(root, fn), errors="replace") as f:
                if name in f.read():
                    return True
    return False


def cmd_names(page, files, pending, src):
    with open(page) as f:
        text = f.read()
    served = set(re.findall(r"^(dedupd_[a-z0-9_]+)[{ ]", text, re.M))
    served |= set(re.findall(r"^# TYPE (dedupd_[a-z0-9_]+) ", text, re.M))
    for path in files:
        wanted = names_in(path)
        missing = sorted(wanted - served)
        for name in [n for n in missing if n in pending and not mentioned(n, src)]:
            print("#    %s: %s is not in %s yet (pending)" % (os.path.basename(path), name, src))
            missing.remove(name)
        check(wanted and not missing,
              "%s: its %d dedupd series are on /metrics" % (os.path.basename(path), len(wanted)),
              "%s: not on dedupd's /metrics: %s" % (path, ", ".join(missing) or "(no series)"))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "podmonitor":
        cmd_podmonitor(args[0])
    elif cmd == "dashboard":
        cmd_dashboard(args[0], args[2] if args[1:2] == ["--help-metrics"] and args[2:] else None)
    elif cmd == "names" and len(args) >= 2:
        pending, src, files = [], "src", []
        while args:
            a = args.pop(0)
            if a == "--pending":
                pending.append(args.pop(0))
            elif a == "--src":
                src = args.pop(0)
            else:
                files.append(a)
        cmd_names(files[0], files[1:], pending, src)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return min(FAILED, 100)


if __name__ == "__main__":
    sys.exit(main())
