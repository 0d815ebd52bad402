#!/usr/bin/env python3
"""The results table of bench/suites/doctor.sh: per workload × strength × run the cause gload doctor named, the
evidence it used, gload's SM median/P10/share below 30% beside an independent pynvml sampler's, and pass/fail.

usage: doctor_summary.py OUT [RUNS [WORKLOADS [STRENGTHS]]]   (reads OUT/doctor/<workload>_s<strength>_r<run>.json)
"""
import json
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
out = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
workloads = (sys.argv[3] if len(sys.argv) > 3 else "input optimizer host padding launch compute").split()
strengths = (sys.argv[4] if len(sys.argv) > 4 else "1 0.5").split()
expected = {"input": "input pipeline", "optimizer": "optimizer/gradient sync", "host": "host work/sync points",
            "padding": "padding/uneven lengths", "launch": "kernel-launch overhead", "compute": "compute bound (fine)"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def f1(v):
    return "-" if v is None else f"{v:.0f}"


rows, ok_runs, total, nv_ok, nv_total, missing = [], 0, 0, 0, 0, 0
per = {}
for w in workloads:
    for s in strengths:
        for r in range(1, runs + 1):
            tag = f"{w}_s{s}_r{r}"
            res, nv = load(f"{out}/doctor/{tag}.json"), load(f"{out}/doctor/{tag}.nvml.json") or {}
            total += 1
            if res is None:
                missing += 1
                rows.append((w, s, str(r), "not run / no result", "-", "-", "-", "-", "-", "FAIL"))
                per.setdefault((w, s), []).append(False)
                continue
            d = res["diagnosis"]
            good = d["cause"] == expected[w]
            ok_runs += good
            per.setdefault((w, s), []).append(good)
            n = nv.get("nvml") or {}
            nvc = "-"
            if n.get("fine_median") is not None and d.get("gpu", -1) >= 0:
                dm, dp = abs(n["fine_median"] - d["sm_median"]), abs(n["fine_p10"] - d["sm_p10"])
                nv_total += 1
                nv_ok += dm <= 5 and dp <= 5
                nvc = f"{'ok' if dm <= 5 and dp <= 5 else 'OFF'} (Δ {dm:.1f}/{dp:.1f})"
            key = (d.get("numbers") or ["-"])[0]
            if len(key) > 80:
                key = key[:79] + "…"
            sm = "no GPU" if d.get("gpu", -1) < 0 else f"{f1(d['sm_median'])} / {f1(d['sm_p10'])} / {100 * d['sm_below_share']:.0f}%"
            rows.append((w, s, str(r), d["cause"], d["evidence"], sm,
                         f"{f1(n.get('fine_median'))} / {f1(n.get('fine_p10'))}", f"{f1(n.get('coarse_median'))} / {f1(n.get('coarse_p10'))}",
                         nvc, ("pass" if good else "FAIL") + ": " + key))
head = ("workload", "strength", "run", "cause named", "evidence", "SM med / P10 / <30% (gload)", "pynvml fine med / P10",
        "pynvml coarse med / P10", "±5 vs fine", "check: first number")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for row in rows:
    print("| " + " | ".join(row) + " |")
print()
print("| workload | strength | expected | named right |")
print("|---|---|---|---|")
for (w, s), v in per.items():
    print(f"| {w} | {s} | {expected[w]} | {sum(v)}/{len(v)} |")
print()
print(f"cause named right in {ok_runs}/{total} runs ({missing} without a result); pynvml ±5 (fine-grained samples) in {nv_ok}/{nv_total}")
print("proof:", "PASS" if ok_runs == total and total > 0 else "FAIL")
