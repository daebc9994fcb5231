#!/usr/bin/env python3
"""bench/report.py - decode benchmarks of every built backend, as a Markdown table and an SVG plot.

Runs <build>/bin/sinter-run on each (model, backend) pair with SINTER_STATS=1, measures the
machine's streaming-read bandwidth in the same run, and writes OUT/report.md and OUT/report.svg
(default OUT: bench/results). Python 3 standard library only.

    python3 bench/report.py --build build                  # stories260K + tinyllama-1.1b Q4_0
    python3 bench/report.py --build build --tiny --out /tmp/r   # seconds: what CTest runs
    python3 bench/report.py --build build --backends lazy,cpu --models stories260K:q4_0
    SINTER_VK_DEVICE=nvidia python3 bench/report.py --backends cpu,vulkan --vulkan-gbps 4800 \
        --models tinyllama-1.1b:q4_0,llama-7b:q4_0 --out bench/results/h200   # a GPU's HBM floor

Per row:
  tokens/s          positions decoded / decode seconds, excluding the plan compilations the
                    SINTER_STATS lines report (the first tokens of a lazy backend compile plans;
                    a real decode runs cached plans after that); "whole run" includes them.
  bytes/token       what one decode step must read: every matrix and norm once, the classifier,
                    one embedding row, and the K and V caches up to the position (mean over the
                    decoded positions). Computed from the model line sinter-run prints.
  floor fraction    bytes/token x tokens/s over the measured read bandwidth: 1.0 means the decode
                    runs as fast as reading its weights and KV cache once allows.
  kernels/token     kernels one steady decode step launches (SINTER_STATS, plan-cache hits; on
                    vulkan the dispatches the device ran, which exceed the plan's kernels while
                    a fused kernel has no generated SPIR-V and runs as its members); for the
                    eager reference backend every call is one kernel.
  calls/token       ComputeBackend calls one step records (the same for every backend).

A backend kind this build lacks (sinter-run says Unimplemented) gets a row saying so.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import xml.sax.saxutils

# GGUF type name -> (weights per block, bytes per block); SEMANTICS.md's table.
DTYPES = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176),
    "q6_k": (256, 210),
}

ALL_BACKENDS = ["reference", "lazy", "cpu", "vulkan"]
COLORS = {"reference": "#7f7f7f", "lazy": "#1f77b4", "cpu": "#2ca02c", "vulkan": "#d62728"}

MODEL_RE = re.compile(
    r"^model: .*?: dim (\d+), hidden (\d+), layers (\d+), heads (\d+), kv heads (\d+), "
    r"vocab (\d+), seq (\d+),.*; matrices (\S+), ([\d.]+) MB", re.M)
SPEED_RE = re.compile(r"^speed: (\d+) positions .* in ([\d.]+) s: ([\d.]+) tokens/s", re.M)
BACKEND_RE = re.compile(r"^backend: (\S+) \((.*), \w+, \d+ compute units", re.M)
# The vulkan kind under SINTER_STATS=1: what a flush really dispatched (a fused kernel without a
# generated kernel runs as its members) and the device time.
VULKAN_RE = re.compile(r"^sinter-stats: vulkan flush: (\d+) dispatches, ([\d.]+) us", re.M)
STATS_RE = re.compile(
    r"^sinter-stats: flush #(\d+) \(([^)]*)\): (\d+) calls, (\d+) kernels, plan (hit|miss) "
    r"\((\d+) params\), compile ([\d.]+) ms, total ([\d.]+) ms", re.M)


class Model:
    """One model the report decodes: stories260K (the real file) or a synthetic preset."""

    def __init__(self, spec, shared):
        # spec: NAME[:DTYPE]; NAME is stories260K (the llama2.c file in shared/models) or a
        # sinter-run --synthetic preset (tinyllama-1.1b, llama-7b).
        name, _, dtype = spec.partition(":")
        self.name, self.dtype = name, dtype.lower() or None
        self.label = name + (" " + self.dtype.upper() if self.dtype else " F32")
        path = os.path.join(shared, "models", name + ".bin")
        if os.path.exists(path):
            self.args = ["--model", path]
            self.shared_classifier = None  # read from the file's header below
            self.path = path
        else:
            self.args = ["--synthetic", name]
            self.path = None
        if self.dtype:
            self.args += ["--dtype", self.dtype]

    def shares_classifier(self):
        if self.path:
            with open(self.path, "rb") as f:
                header = f.read(28)
            return int.from_bytes(header[20:24], "little", signed=True) > 0
        return self.name == "stories260K"  # tools/model/Synthetic.cpp's presets


def tensor_bytes(rows, cols, dtype):
    # A matrix whose rows are not whole blocks keeps F32 (ModelWeights.cpp, Synthetic.cpp).
    block, size = DTYPES[dtype]
    if cols % block:
        block, size = DTYPES["f32"]
    return rows * (cols // block) * size


def bytes_per_token(cfg, dtype, embedding_dtype, shared_classifier, positions):
    """Weight and KV bytes one decode step reads (mean over positions 0..positions-1), and the
    total tensor bytes (to check against sinter-run's own figure)."""
    dim, hidden, layers, heads, kv_heads, vocab = (cfg[k] for k in (
        "dim", "hidden", "layers", "heads", "kv_heads", "vocab"))
    kv = dim // heads * kv_heads
    per_layer = (tensor_bytes(dim, dim, dtype) * 2 + tensor_bytes(kv, dim, dtype) * 2 +
                 tensor_bytes(hidden, dim, dtype) * 2 + tensor_bytes(dim, hidden, dtype) +
                 2 * dim * 4)
    # The token table: quantized in synthetic models, f32 in llama2.c files (--dtype requantizes
    # only the matrices there); a shared classifier reads it in that format.
    embedding = tensor_bytes(vocab, dim, embedding_dtype)
    classifier = embedding if shared_classifier else tensor_bytes(vocab, dim, dtype)
    weights = layers * per_layer + dim * 4 + classifier + dim * 4  # + one f32 embedding row
    kv_read = 2 * layers * kv * 4 * (positions + 1) / 2  # K and V up to each position, mean
    total = embedding + layers * per_layer + dim * 4 + (0 if shared_classifier else classifier)
    return weights + kv_read, total


def run(cmd, env, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, "timed out after %d s" % timeout, time.monotonic() - t0


def decode(sinter_run, model, backend, steps, timeout):
    """One sinter-run; a dict of the row's figures, or {'error': why}."""
    env = dict(os.environ, SINTER_STATS="1")
    env.pop("SINTER_BACKEND", None)
    cmd = [sinter_run] + model.args + ["--backend", backend, "--steps", str(steps), "--no-stop"]
    rc, out, err, wall = run(cmd, env, timeout)
    row = {"model": model.label, "backend": backend, "command": " ".join(cmd[1:])}
    if rc != 0:
        last = (err.strip().splitlines() or ["exit code %s" % rc])[-1]
        row["error"] = ("not built in this build" if "UNIMPLEMENTED" in last
                        or "not built" in last else last[:160])
        return row
    m, s = MODEL_RE.search(out), SPEED_RE.search(out)
    if not m or not s:
        row["error"] = "could not read sinter-run's output"
        return row
    cfg = dict(zip(("dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq"),
                   map(int, m.groups()[:7])))
    matrices, model_mb = m.group(8).lower(), float(m.group(9))
    positions, seconds = int(s.group(1)), float(s.group(2))
    flushes = [dict(why=f[1], calls=int(f[2]), kernels=int(f[3]), hit=f[4] == "hit",
                    compile_ms=float(f[6]), total_ms=float(f[7])) for f in STATS_RE.findall(err)]
    compile_s = sum(f["compile_ms"] for f in flushes) / 1e3
    warm_s = max(seconds - compile_s, 1e-9)
    dtype = matrices if matrices in DTYPES else "f32"
    per_token, total = bytes_per_token(cfg, model.dtype or dtype,
                                       "f32" if model.path else (model.dtype or "f32"),
                                       model.shares_classifier(), positions)
    # Steady steps: the flushes that replayed a cached plan (the decode's copy_from_device).
    steady = [f for f in flushes if f["hit"]] or flushes[-1:]
    vulkan = [(int(d), float(us)) for d, us in VULKAN_RE.findall(err)]
    if vulkan and len(vulkan) == len(flushes):
        for f, (dispatches, us) in zip(flushes, vulkan):
            f["kernels"], f["device_us"] = dispatches, us
    row.update(
        name=BACKEND_RE.search(out).group(1) if BACKEND_RE.search(out) else backend,
        device=re.sub(r" \([^()]*\)$", "", BACKEND_RE.search(out).group(2))
        if BACKEND_RE.search(out) else "",
        dispatches=bool(vulkan),
        positions=positions, seconds=seconds, compile_s=compile_s,
        tokens_per_s=positions / warm_s, tokens_per_s_whole=positions / max(seconds, 1e-9),
        bytes_per_token=per_token, model_mb=model_mb, computed_mb=total / 1e6,
        kernels_per_token=statistics.median(f["kernels"] for f in steady) if steady else None,
        calls_per_token=statistics.median(f["calls"] for f in steady) if steady else None,
        hits=sum(f["hit"] for f in flushes), misses=sum(not f["hit"] for f in flushes),
        wall=wall)
    return row


def _scan(args):
    size, repeats = args
    # Written, not calloc'd: untouched zero pages all map one physical page and read from cache.
    buf = b"\x02" * size
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        buf.find(b"\x01")  # memchr over the whole buffer: a streaming read
        best = max(best, size / (time.perf_counter() - t0))
    return best


def read_bandwidth(build):
    """(bytes per second, how it was measured): sinter-bench-cpu's BM_ReadBandwidth when built,
    else a memchr scan of a zero buffer in one process per core."""
    bench = os.path.join(build, "bench", "sinter-bench-cpu")
    if os.access(bench, os.X_OK):
        for min_time in (["--benchmark_min_time=0.2"], ["--benchmark_min_time=0.2s"], []):
            rc, out, err, _ = run([bench, "--benchmark_filter=BM_ReadBandwidth",
                                   "--benchmark_format=json"] + min_time, dict(os.environ), 300)
            if rc == 0:
                try:
                    runs = json.loads(out)["benchmarks"]
                    best = max(runs, key=lambda b: b.get("bytes_per_second", 0))
                    return best["bytes_per_second"], "sinter-bench-cpu %s (256 MiB)" % best["name"]
                except (ValueError, KeyError):
                    break
    size = 256 << 20  # well past any last-level cache
    cores = os.cpu_count() or 1
    with multiprocessing.Pool(cores) as pool:
        together = sum(pool.map(_scan, [(size, 3)] * cores))
    single = _scan((size, 3))
    return max(together, single), ("memchr over %d MiB in each of %d processes; sinter-bench-cpu "
                                   "not built" % (size >> 20, cores))


def fmt(v, digits=3):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0f" % v
    return "%.*g" % (digits, v)


def markdown(rows, bandwidth, how, argv, machine):
    lines = [
        "# Sinter decode benchmark report", "",
        "Generated by `python3 bench/report.py %s` on %s; %s." % (" ".join(argv), machine["date"],
                                                                  machine["commit"]),
        "Machine: %s, %d hardware threads. Read bandwidth %.2f GB/s (%s)." % (
            machine["cpu"], machine["threads"], bandwidth / 1e9, how), "",
        "![tokens/s, fraction of the bandwidth floor and kernels per token per backend]"
        "(report.svg)", "",
        "| model | backend | tokens/s | tokens/s (whole run) | MB read/token | effective GB/s "
        "| floor fraction | kernels/token | calls/token | plans hit/miss | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append("| %s | %s | - | - | - | - | - | - | - | - | %s |" % (
                r["model"], r["backend"], r["error"].replace("|", "/")))
            continue
        eff = r["bytes_per_token"] * r["tokens_per_s"]
        note = "%d positions in %.2f s, %.2f s compiling" % (r["positions"], r["seconds"],
                                                            r["compile_s"])
        if r.get("dispatches"):
            note += "; kernels are Vulkan dispatches on %s" % r["device"]
        if r["floor_bw"] != bandwidth:
            note += "; floor: %.0f GB/s device bandwidth (--vulkan-gbps)" % (r["floor_bw"] / 1e9)
        if abs(r["computed_mb"] - r["model_mb"]) > 0.05 + 0.001 * r["model_mb"]:
            note += "; byte count %.1f MB differs from sinter-run's %.1f MB" % (
                r["computed_mb"], r["model_mb"])
        lines.append("| %s | %s (`%s`) | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["backend"], r["name"], fmt(r["tokens_per_s"]),
            fmt(r["tokens_per_s_whole"]), fmt(r["bytes_per_token"] / 1e6), fmt(eff / 1e9),
            fmt(eff / r["floor_bw"]), fmt(r["kernels_per_token"]), fmt(r["calls_per_token"]),
            "%d/%d" % (r["hits"], r["misses"]) if r["hits"] + r["misses"] else "eager", note +
            ("; eager: one kernel per call" if r.get("eager") else "")))
    lines += [
        "", "Columns: **tokens/s** excludes the plan compilations SINTER_STATS reports (a real "
        "decode replays cached plans after its first tokens); **MB read/token** is every matrix "
        "and norm, the classifier, one embedding row and the K/V caches up to the position; "
        "**floor fraction** is MB read/token x tokens/s over the read bandwidth above (1.0: as "
        "fast as reading the weights once allows); **kernels/token** counts kernels of a cached "
        "decode step (eager reference: one per call; vulkan: the dispatches the device ran); "
        "**calls/token** the ComputeBackend calls a step records.", ""]
    return "\n".join(lines)


def svg(rows, bandwidth, machine):
    """Horizontal bars: one row of three panels per model, one bar per backend."""
    esc = xml.sax.saxutils.escape
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    backends = []
    for r in rows:
        if r["backend"] not in backends:
            backends.append(r["backend"])
    panels = [("tokens/s", lambda r: r["tokens_per_s"]),
              ("fraction of the bandwidth floor", lambda r: r["bytes_per_token"] *
               r["tokens_per_s"] / r["floor_bw"]),
              ("kernels per token", lambda r: r["kernels_per_token"])]
    label_w, panel_w, gap, bar_h, bar_gap = 90, 250, 30, 16, 5
    width = label_w + 3 * panel_w + 2 * gap + 20
    group_h = 40 + len(backends) * (bar_h + bar_gap)
    height = 70 + len(models) * (group_h + 20) + 30
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12">' % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="22" font-size="16" font-weight="bold">Sinter decode: tokens/s, '
           'fraction of the bandwidth floor, kernels per token</text>',
           '<text x="10" y="42" fill="#555">%s; read bandwidth %.2f GB/s; %s</text>' % (
               esc(machine["cpu"]), bandwidth / 1e9, esc(machine["commit"]))]
    y = 70
    for model in models:
        out.append('<text x="10" y="%d" font-size="14" font-weight="bold">%s</text>' % (
            y + 12, esc(model)))
        mrows = {r["backend"]: r for r in rows if r["model"] == model}
        for p, (title, value) in enumerate(panels):
            x0 = label_w + p * (panel_w + gap)
            vals = [value(r) for r in mrows.values() if "error" not in r and value(r) is not None]
            top = max(vals + [1.0 if p == 1 else 1e-9]) * 1.15
            out.append('<text x="%d" y="%d" fill="#333">%s</text>' % (x0, y + 30, esc(title)))
            base = y + 36
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (
                x0, base, x0, base + len(backends) * (bar_h + bar_gap)))
            if p == 1:  # the floor itself
                fx = x0 + panel_w * 1.0 / top
                out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" '
                           'stroke-dasharray="4 3"/>' % (fx, base, fx,
                                                         base + len(backends) * (bar_h + bar_gap)))
            for i, b in enumerate(backends):
                by = base + i * (bar_h + bar_gap) + bar_gap
                if p == 0:
                    out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (
                        label_w - 8, by + bar_h - 4, esc(b)))
                r = mrows.get(b)
                v = value(r) if r and "error" not in r else None
                if v is None:
                    why = "not run" if not r else ("n/a" if "error" not in r else r["error"])
                    out.append('<text x="%d" y="%d" fill="#999">%s</text>' % (
                        x0 + 4, by + bar_h - 4, esc(why[:40])))
                    continue
                w = max(1.0, panel_w * v / top)
                out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
                    x0, by, w, bar_h, COLORS.get(b, "#9467bd")))
                out.append('<text x="%.1f" y="%d">%s</text>' % (x0 + w + 4, by + bar_h - 4,
                                                               esc(fmt(v))))
        y += group_h + 20
    out.append('<text x="10" y="%d" fill="#555">tokens/s without plan compilation; floor: '
               '(weight + KV bytes per token) x tokens/s / read bandwidth (dashed line = 1)'
               '</text>' % (height - 12))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def machine_info(root):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"cpu": cpu, "threads": os.cpu_count() or 1,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": "commit " + commit if commit else "no git commit"}


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(root, "build"), help="CMake build folder")
    ap.add_argument("--shared", default=os.environ.get("SINTER_SHARED_DIR",
                                                       os.path.join(root, "..", "shared")))
    ap.add_argument("--out", default=os.path.join(root, "bench", "results"))
    ap.add_argument("--backends", default=",".join(ALL_BACKENDS),
                    help="comma list (default: all; kinds this build lacks get a row saying so)")
    ap.add_argument("--models", default=None,
                    help="comma list of NAME[:DTYPE] (default stories260K,tinyllama-1.1b:q4_0)")
    ap.add_argument("--steps", type=int, default=None, help="tokens per run (default: 128 for "
                    "stories260K; for synthetic presets 4 on reference and lazy, 8 on vulkan, "
                    "16 on cpu; 4 with --tiny)")
    ap.add_argument("--tiny", action="store_true",
                    help="stories260K only, 4 steps: for CTest")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per sinter-run")
    ap.add_argument("--vulkan-gbps", type=float,
                    default=float(os.environ.get("SINTER_PEAK_GBPS", 0) or 0),
                    help="memory bandwidth (GB/s) of the Vulkan device, the floor of the vulkan "
                    "rows (default SINTER_PEAK_GBPS; unset: the host read bandwidth, right for "
                    "lavapipe, whose buffers are host memory)")
    a = ap.parse_args(argv)

    sinter_run = os.path.join(a.build, "bin", "sinter-run")
    if not os.access(sinter_run, os.X_OK):
        print("report: %s not found: build the target sinter-run first" % sinter_run,
              file=sys.stderr)
        return 1
    specs = a.models or ("stories260K" if a.tiny else "stories260K,tinyllama-1.1b:q4_0")
    models = [Model(s, a.shared) for s in specs.split(",") if s]
    backends = [b for b in a.backends.split(",") if b]
    os.makedirs(a.out, exist_ok=True)

    bandwidth, how = read_bandwidth(a.build)
    print("report: read bandwidth %.2f GB/s (%s)" % (bandwidth / 1e9, how), flush=True)
    rows = []
    for model in models:
        for b in backends:
            # Enough tokens that the two compiling steps are a small part of a run; the scalar
            # reference kernels (reference, and lazy's plan interpreter) take seconds per token
            # of a large model.
            steps = a.steps or (4 if a.tiny else 128 if model.name == "stories260K" else
                                4 if b in ("reference", "lazy") else 8 if b == "vulkan" else 16)
            row = decode(sinter_run, model, b, steps, a.timeout)
            rows.append(row)
            if "error" in row:
                print("report: %s on %s: %s" % (model.label, b, row["error"]), flush=True)
            else:
                print("report: %s on %s: %.2f tokens/s, %s kernels/token (%.1f s)" % (
                    model.label, b, row["tokens_per_s"], fmt(row["kernels_per_token"]),
                    row["wall"]), flush=True)
    # An eager backend launches one kernel per call; the calls are the driver's, the same on
    # every backend of a model, so they are taken from a lazy row of that model.
    for r in rows:
        if "error" not in r and r["kernels_per_token"] is None:
            calls = [o["calls_per_token"] for o in rows if o["model"] == r["model"] and
                     "error" not in o and o["calls_per_token"]]
            if calls:
                r["calls_per_token"] = r["kernels_per_token"] = calls[0]
                r["eager"] = True
    # Measured again after the decodes; the higher figure is the machine's (a busy moment on a
    # shared machine only lowers it, which would flatter every floor fraction).
    again, how_again = read_bandwidth(a.build)
    print("report: read bandwidth after the decodes %.2f GB/s" % (again / 1e9), flush=True)
    if again > bandwidth:
        bandwidth, how = again, how_again
    how += "; the higher of a measurement before and one after the decodes"
    for r in rows:
        r["floor_bw"] = (a.vulkan_gbps * 1e9 if r["backend"] == "vulkan" and a.vulkan_gbps
                         else bandwidth)
    machine = machine_info(root)
    shown = ["--build", os.path.relpath(a.build, root)] + [x for x in argv if x not in (
        "--build", a.build)]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(markdown(rows, bandwidth, how, shown, machine))
    with open(os.path.join(a.out, "report.svg"), "w") as f:
        f.write(svg(rows, bandwidth, machine))
    print("report: wrote %s and %s" % (os.path.join(a.out, "report.md"),
                                        os.path.join(a.out, "report.svg")))
    return 0 if any("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
