#!/usr/bin/env python3
"""bench/report_check.py - checks what bench/report.py wrote: the files render.

    python3 bench/report_check.py OUT_DIR --backends reference,lazy,cpu --measured reference,lazy

report.svg must be well-formed XML with an <svg> root of positive size and, for every model, a
bar (or a note saying why not) per backend; report.md must hold the table with one row per
(model, backend), and the --measured backends must have numbers (tokens/s > 0, a floor fraction,
kernels per token) rather than a note. Exits 1 with the reasons otherwise.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def table_rows(md):
    rows = []
    header = None
    for line in md.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append(dict(zip(header, cells)))
    return header, rows


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--backends", required=True)
    ap.add_argument("--measured", default="")
    a = ap.parse_args(argv)
    backends = [b for b in a.backends.split(",") if b]
    measured = [b for b in a.measured.split(",") if b]
    errors = []

    try:
        root = ET.parse(os.path.join(a.out, "report.svg")).getroot()
    except (OSError, ET.ParseError) as e:
        print("report.svg: %s" % e)
        return 1
    if root.tag != SVG + "svg":
        errors.append("report.svg: the root is %s, not svg" % root.tag)
    if not (float(root.get("width", 0)) > 0 and float(root.get("height", 0)) > 0):
        errors.append("report.svg: no positive width and height")
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    rects = list(root.iter(SVG + "rect"))

    try:
        with open(os.path.join(a.out, "report.md")) as f:
            md = f.read()
    except OSError as e:
        print("report.md: %s" % e)
        return 1
    if "](report.svg)" not in md:
        errors.append("report.md: does not show report.svg")
    header, rows = table_rows(md)
    if not header or "backend" not in header or "tokens/s" not in header:
        errors.append("report.md: no table with backend and tokens/s columns: %s" % header)
        rows = []
    models = sorted({r["model"] for r in rows})
    if not models:
        errors.append("report.md: the table has no rows")
    for model in models:
        if model not in texts:
            errors.append("report.svg: no group for model %s" % model)
        for b in backends:
            mine = [r for r in rows if r["model"] == model and
                    re.match(r"%s( |$)" % re.escape(b), r["backend"])]
            if len(mine) != 1:
                errors.append("report.md: %d rows for %s on %s, expected 1" % (len(mine), model, b))
                continue
            if b in measured:
                r = mine[0]
                try:
                    ok = (float(r["tokens/s"]) > 0 and float(r["floor fraction"]) > 0 and
                          float(r["kernels/token"]) >= 1)
                except (KeyError, ValueError):
                    ok = False
                if not ok:
                    errors.append("report.md: %s on %s has no figures: %s" % (b, model, r))
    for b in backends:
        if texts.count(b) != len(models):
            errors.append("report.svg: backend label %s appears %d times, expected once per model "
                          "(%d)" % (b, texts.count(b), len(models)))
    bars = [r for r in rects if r.get("fill") not in ("white",)]
    if measured and len(bars) < 3 * len(measured) * len(models):
        errors.append("report.svg: %d bars, expected at least %d (3 panels x %d measured backends "
                      "x %d models)" % (len(bars), 3 * len(measured) * len(models), len(measured),
                                        len(models)))
    for e in errors:
        print(e)
    if not errors:
        print("report_check: %s: %d table rows, %d bars, well-formed SVG" % (a.out, len(rows),
                                                                           len(bars)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
