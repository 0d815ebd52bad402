#!/usr/bin/env python3
"""Draws issue 18's scaling plot: the engine's speed-up against workers, from the JSON lines `gload encode --bench`
prints (bench/device.sh tokenize table writes them to engine.jsonl, each with a "label"). One line per label that
was measured at three or more worker counts (the best run of each count), the ideal (linear) line, and the 12x target. Standard library only,
so it runs anywhere the table was fetched to.

usage: plot_scaling.py ENGINE.jsonl OUT.svg [TITLE]
"""
import json
import sys
from collections import defaultdict

W, H = 820, 440
L, R, T, B = 64, 310, 44, 52
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "gload encode --bench: speed-up against workers (GOMAXPROCS = workers)"
    series = defaultdict(dict)
    with open(src, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
                pts = series[r.get("label", "engine")]
                w = int(r["workers"])
                pts[w] = max(pts.get(w, 0.0), float(r["mb_per_s"]))
            except (ValueError, KeyError) as e:
                sys.exit(f"{src}:{n}: not an encode --bench line ({e})")
    series = {k: v for k, v in series.items() if len(v) >= 3 and 1 in v}
    if not series:
        sys.exit(f"{src}: no label with a 1-worker run and three or more worker counts")
    xmax = max(max(v) for v in series.values())
    ymax = xmax

    def px(w: float) -> float:
        return L + w / xmax * (W - L - R)

    def py(s: float) -> float:
        return T + (1 - s / ymax) * (H - T - B)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="24" font-size="14">{title}</text>']
    for t in range(0, int(xmax) + 1, max(1, int(xmax) // 8)):
        o.append(f'<line x1="{px(t):.1f}" y1="{py(0):.1f}" x2="{px(t):.1f}" y2="{py(ymax):.1f}" stroke="#eee"/>')
        o.append(f'<text x="{px(t):.1f}" y="{py(0) + 16:.1f}" text-anchor="middle">{t}</text>')
        o.append(f'<line x1="{px(0):.1f}" y1="{py(t):.1f}" x2="{px(xmax):.1f}" y2="{py(t):.1f}" stroke="#eee"/>')
        o.append(f'<text x="{px(0) - 6:.1f}" y="{py(t) + 4:.1f}" text-anchor="end">{t}x</text>')
    o.append(f'<text x="{(L + W - R) / 2:.1f}" y="{H - 12}" text-anchor="middle">workers</text>')
    o.append(f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(xmax):.1f}" y2="{py(ymax):.1f}" stroke="#999" stroke-dasharray="4 4"/>')
    o.append(f'<line x1="{px(0):.1f}" y1="{py(12):.1f}" x2="{px(xmax):.1f}" y2="{py(12):.1f}" stroke="#f0a000" stroke-dasharray="2 3"/>')
    legend = [("#999", "linear"), ("#f0a000", "target 12x")]
    for i, (label, pts) in enumerate(sorted(series.items())):
        c = COLORS[i % len(COLORS)]
        base = pts[1]
        xy = [(px(w), py(v / base)) for w, v in sorted(pts.items())]
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in xy)}"/>')
        for (x, y), (w, v) in zip(xy, sorted(pts.items())):
            o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"><title>{w} workers: {v:.1f} MB/s ({v / base:.1f}x)</title></circle>')
        top = max(pts)
        legend.append((c, f"{label}: {base:.0f} to {pts[top]:.0f} MB/s"))
    for i, (c, text) in enumerate(legend):
        y = T + 10 + 18 * i
        o.append(f'<line x1="{W - R + 12}" y1="{y}" x2="{W - R + 32}" y2="{y}" stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{W - R + 38}" y="{y + 4}" font-size="11">{text}</text>')
    o.append("</svg>")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
