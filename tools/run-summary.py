#!/usr/bin/env python3
"""tools/run-summary.py - the summary tools/run-main.sh ends with: one column a run, from the
records `sinter-run --json PATH` wrote (one JSON object a file).

Usage: run-summary.py RECORD.json...  (a file that is absent or empty is skipped, e.g. when a
run failed or was given --help; with none left nothing is printed)
"""
import json
import os
import sys


def number(value, fmt):
    return "-" if value is None else fmt % value


def column(r):
    """The cells of one run, in the order of ROWS."""
    gen, prompt = r.get("generation", {}), r.get("prompt", {})
    counted = gen if gen.get("tokens") else prompt  # the counters of the steps that ran
    device = r["device"]
    if r.get("device_kind") and r["device_kind"] != "Cpu":
        device += " (%s)" % r["device_kind"]
    return [
        r["model"],
        device,
        "%s (%s)" % (r["backend"], r["kind"]),
        number(counted.get("calls_per_token"), "%.0f"),
        number(counted.get("kernels_per_token"), "%.0f"),
        number(counted.get("submissions_per_token"), "%.1f"),
        "%.3f s" % r["load_s"],
        "%.3f s (%d plans)" % (r["compile_s"], r["plans_compiled"]),
        "%.3f ms a token" % prompt["ms_per_token"],
        ("%.3f ms a token" % gen["ms_per_token"]) if gen.get("tokens") else "-",
        ("%.2f" % gen["tokens_per_s"]) if gen.get("tokens") else "-",
    ]


ROWS = ["model", "device", "backend", "calls a token", "kernels a token",
        "submissions a token", "load", "compile", "prompt", "generation",
        "generation tokens/s"]


def main(paths):
    records = []
    for path in paths:
        if os.path.isfile(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                records.append(json.load(f))
    if not records:
        return 0
    columns = [column(r) for r in records]
    cut = 30  # keep two runs within 100 columns
    columns = [[c if len(c) <= cut else c[:cut - 3] + "..." for c in col] for col in columns]
    left = max(len(name) for name in ROWS)
    widths = [max(len(c) for c in col) for col in columns]
    print("summary (greedy decode; generation leaves plan compilation out):")
    for i, name in enumerate(ROWS):
        cells = [col[i].ljust(w) for col, w in zip(columns, widths)]
        print(("  %s  %s" % (name.ljust(left), "  ".join(cells))).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
