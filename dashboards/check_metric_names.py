#!/usr/bin/env python3
"""Checks that every metric and label the dashboards and rules query is one dtsuite exports.

Part of dashboards/ (ctest dashboards_metric_names). The exported names come from a real run's
--prom textfile (the script makes one with --dtsuite, or reads --textfile), not from a list kept
by hand; the queried names are read out of the PromQL in the Grafana JSON and the rule files.

  check_metric_names.py --dtsuite BIN [--mpiexec EXE --mpiexec-flags "..."] FILE...
  check_metric_names.py --textfile dtsuite.prom FILE...
FILE: *.json (Grafana dashboards) and *.yml (Prometheus rules and their promtool tests).
Exit 0: all known; 1: unknown names (listed); 2: bad input or the run failed.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# Labels that are not dtsuite's but are on its series in Prometheus: the scrape target's job and
# instance, and the Pushgateway grouping key dtsuite pushes under (run_id, host).
TARGET_LABELS = {"job", "instance", "host", "run_id", "__name__"}

IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHER_BLOCK = re.compile(r"\{([^{}]*)\}")
MATCHER_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
LABEL_VALUES = re.compile(r"label_values\(\s*(?:[^,()]*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)")
LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")


def exported(textfile_text):
    """Metric names (families and samples) and label names in a text exposition."""
    names, labels = set(), set()
    for line in textfile_text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        match = IDENTIFIER.match(line)
        names.add(match.group(0))
        rest = line[match.end():]
        if rest.startswith("{"):
            body = rest[1:rest.rindex("}")]
            labels.update(MATCHER_NAME.findall(STRING.sub('""', body)))
    return names, labels


def queried(expr):
    """Metric and label names a PromQL expression (or a series selector) refers to."""
    bare = STRING.sub('""', expr)  # label values are not names
    metrics = {t for t in IDENTIFIER.findall(bare) if t.startswith(("dtsuite_", "dtsuite:"))}
    labels = set()
    for block in MATCHER_BLOCK.findall(bare):
        labels.update(MATCHER_NAME.findall(block))
    for group in GROUPING.findall(bare):
        labels.update(n.strip() for n in group.split(",") if n.strip())
    labels.update(LABEL_VALUES.findall(bare))
    return metrics, labels


def yaml_values(text, keys):
    """The values of `keys` in a YAML file: plain, quoted, or block scalars (| and >). Enough for
    rule files and promtool tests, which is all this reads."""
    lines = text.splitlines()
    key_line = re.compile(r"^(\s*)(?:-\s+)?(" + "|".join(keys) + r"):\s*(.*?)\s*$")
    out = []
    i = 0
    while i < len(lines):
        match = key_line.match(lines[i])
        i += 1
        if not match:
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        if value in ("|", "|-", ">", ">-"):
            block = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            value = "\n".join(block)
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = json.loads(value)
        out.append((key, value))
    return out


def grafana_queries(node, out):
    """Every PromQL query of a dashboard: targets' expr, variables' queries; legends' labels."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                out.append(("expr", value))
            elif key == "query" and isinstance(value, str):
                out.append(("expr", value))
            elif key == "legendFormat" and isinstance(value, str):
                out.append(("legend", value))
            else:
                grafana_queries(value, out)
    elif isinstance(node, list):
        for item in node:
            grafana_queries(item, out)
    return out


def make_textfile(args, directory):
    prom = os.path.join(directory, "dtsuite.prom")
    command = []
    if args.mpiexec:
        command = [args.mpiexec, "-np", "2"] + shlex.split(args.mpiexec_flags or "")
    # Collectives and equivalence, cut to a few cases: every family kind appears (timed summaries,
    # gauges, thresholds, verdicts, the equivalence errors) in seconds.
    command += [args.dtsuite, "run", "collectives", "equivalence", "--quick", "-o", "sum", "-d", "f32",
                "--collective", "all_reduce", "-T", "120", "--prom", prom,
                "--csv", os.path.join(directory, "dtsuite.csv")]
    run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    if run.returncode not in (0, 1):  # 1: a case failed, the metrics are still all there
        sys.exit(f"check_metric_names: dtsuite run exited {run.returncode}: {run.stderr.strip()}")
    with open(prom) as f:
        return f.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--textfile", help="a dtsuite --prom textfile to compare with")
    parser.add_argument("--dtsuite", help="dtsuite binary: make the textfile with a short real run")
    parser.add_argument("--mpiexec", help="launcher for the run (two ranks)")
    parser.add_argument("--mpiexec-flags", default="", help="extra launcher flags, one string")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    if bool(args.textfile) == bool(args.dtsuite):
        parser.error("give exactly one of --textfile and --dtsuite")

    if args.textfile:
        with open(args.textfile) as f:
            text = f.read()
    else:
        with tempfile.TemporaryDirectory(prefix="dtsuite_names_") as directory:
            text = make_textfile(args, directory)
    metric_names, label_names = exported(text)
    if "dtsuite_build_info" not in metric_names:
        sys.exit("check_metric_names: the textfile has no dtsuite_build_info: not a dtsuite textfile")
    label_names |= TARGET_LABELS

    recorded = set()
    uses = []  # (file, kind, text)
    for path in args.files:
        with open(path) as f:
            text = f.read()
        if path.endswith(".json"):
            uses += [(path, kind, value) for kind, value in grafana_queries(json.loads(text), [])]
        else:
            for key, value in yaml_values(text, ["record", "expr", "series", "labels"]):
                if key == "record":
                    recorded.add(value)
                else:
                    uses.append((path, "expr", value))
            uses += [(path, "template", m) for m in TEMPLATE_LABEL.findall(text)]

    problems = []
    checked_metrics = set()
    for path, kind, value in uses:
        if kind == "legend":
            labels, metrics = set(LEGEND_LABEL.findall(value)), set()
        elif kind == "template":
            labels, metrics = {value}, set()
        else:
            metrics, labels = queried(value)
        for metric in sorted(metrics):
            checked_metrics.add(metric)
            known = metric in recorded if ":" in metric else metric in metric_names
            if not known:
                what = "recording rule never defined" if ":" in metric else "metric dtsuite does not export"
                problems.append(f"{path}: {what}: {metric}")
        for label in sorted(labels - label_names):
            problems.append(f"{path}: label dtsuite does not export: {label} (in {value.strip()[:80]!r})")
    if not checked_metrics:
        problems.append("no dtsuite metric found in " + ", ".join(args.files) + ": nothing was checked")
    for problem in sorted(set(problems)):
        print(problem)
    if problems:
        return 1
    print(f"check_metric_names: {len(checked_metrics)} metric names and their labels, in {len(args.files)} "
          f"files, are all exported or recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
