#!/usr/bin/env python3
"""Folds SINTER_STATS=1 output of the Vulkan decode benchmark into one JSON line per preset.

stdin: the benchmark's stderr, where each flush prints one line per dispatch
  sinter-stats: vulkan kernel #K NAME: T us, B bytes, G GB/s
and a summary line
  sinter-stats: vulkan flush: N dispatches, T us of kernel time
Only the flushes with the most dispatches count (the decode steps; the warm-up's uploads and
other small flushes are left out). Output: {"preset", "tokens", "kernel_us_per_token", "span_us_per_token" (first start to last
end), "gap_us_per_token" and "gap_us_per_dispatch" (idle time between dispatches),
"widest_gap_us", "widest_gap_before" (the dispatches each token's widest gap preceded, with how
many tokens: the three most frequent), "record_us_per_token" (host time before the submission: resolving the steps,
and recording unless the kept command buffer is replayed), "dispatches_per_token", "kernels": [{"name", "launches_per_token", "us_per_token", "us_per_launch",
"GB_per_s", "of_peak", "share"}...]} with the kernels sorted by time, slowest first. "of_peak" is
GB_per_s over the floor's bandwidth (SINTER_PEAK_GBPS: run-h200.sh passes the device copy
bandwidth the decode benchmark measured; default 4070, the issue's 4.07 TB/s), so the kernel
furthest from the floor is the one with the lowest.
"""
import collections
import json
import os
import re
import sys

KERNEL = re.compile(r"sinter-stats: vulkan kernel #\d+ (\S+): ([\d.]+) us, (\d+) bytes")
FLUSH = re.compile(r"sinter-stats: vulkan flush: (\d+) dispatches, ([\d.]+) us of kernel time"
                   r"(?:, ([\d.]+) us from first start to last end, ([\d.]+) us of gaps between "
                   r"dispatches \(widest ([\d.]+) us(?:, before (kernel #\d+ \S+))?\), ([\d.]+) us "
                   r"(?:recording|on the host))?")


def main():
    preset = sys.argv[1] if len(sys.argv) > 1 else "?"
    flushes, current = [], []
    for line in sys.stdin:
        m = KERNEL.match(line)
        if m:
            current.append((m.group(1), float(m.group(2)), int(m.group(3))))
            continue
        m = FLUSH.match(line)
        if m:
            g = m.groups()
            extra = [float(x) if x else 0.0 for x in (g[2], g[3], g[4], g[6])]
            flushes.append((int(m.group(1)), float(m.group(2)), current, extra, g[5] or ""))
            current = []
    if not flushes:
        print(json.dumps({"preset": preset, "error": "no sinter-stats lines"}))
        return
    most = max(f[0] for f in flushes)
    steps = [f for f in flushes if f[0] == most]
    time = collections.defaultdict(float)
    count = collections.Counter()
    nbytes = collections.defaultdict(int)
    for _, _, kernels, _, _ in steps:
        for name, us, b in kernels:
            time[name] += us
            count[name] += 1
            nbytes[name] += b
    tokens = len(steps)
    total = sum(f[1] for f in steps) / tokens
    peak = float(os.environ.get("SINTER_PEAK_GBPS") or 4070.0)
    rows = []
    for name in sorted(time, key=lambda n: -time[n]):
        rows.append({
            "name": name,
            "launches_per_token": count[name] / tokens,
            "us_per_token": round(time[name] / tokens, 2),
            "us_per_launch": round(time[name] / count[name], 3),
            "GB_per_s": round(nbytes[name] / (time[name] * 1e3), 1) if time[name] else 0,
            "of_peak": round(nbytes[name] / (time[name] * 1e3) / peak, 3) if time[name] else 0,
            "share": round(time[name] / tokens / total, 4) if total else 0,
        })
    mean = lambda i: round(sum(f[3][i] for f in steps) / tokens, 1)
    # Where each token's widest gap fell: the dispatch after it, counted over the tokens.
    widest_before = collections.Counter(f[4] for f in steps if f[4])
    print(json.dumps({"preset": preset, "tokens": tokens, "kernel_us_per_token": round(total, 1),
                      "span_us_per_token": mean(0), "gap_us_per_token": mean(1),
                      "gap_us_per_dispatch": round(mean(1) / max(most - 1, 1), 3),
                      "widest_gap_us": round(max(f[3][2] for f in steps), 1),
                      "widest_gap_before": dict(widest_before.most_common(3)),
                      "record_us_per_token": mean(3), "dispatches_per_token": most,
                      "kernels": rows}))


if __name__ == "__main__":
    main()
