#!/usr/bin/env bash
# Issue 39 proof on the GPU machine: `gload doctor` names the one known cause of each induced workload of
# bench/doctor_workloads.py (input-starved, non-fused optimizer over many small tensors, a host sync and host work
# every step, uneven lengths padded per batch, a tiny launch-bound model, large bf16 matmuls), at full strength and
# with the effect halved, RUNS times each (round-robin, so a cut-short call still covers every workload); and gload's
# SM median/P10 against an independent pynvml sampler over the same steps (±5 points).
#
# bench/device.sh doctor (about 7-8 minutes: 36 runs of ~12 s; BUDGET seconds, default 510, stops starting runs).
# Knobs: RUNS (3), SECS (5: counted seconds per run), SKIP (8 warm-up steps), PROFILE (3:3: the profiler window, inside
# the warm-up so its cost stays out of the judged span), WORKLOADS, STRENGTHS ("1 0.5"), PYTHON (python3), CPU=1 (a
# smoke test of the suite on a machine without a GPU). Writes to $OUT: doctor/<workload>_s<strength>_r<run>.{json,
# nvml.json,log} (report SVGs for run 1), doctor_summary.md (the results table), versions.txt.
set -uo pipefail
. bench/lib.sh
RUNS=${RUNS:-3}
SECS=${SECS:-5}
SKIP=${SKIP:-8}
PROFILE=${PROFILE:-3:3}
BUDGET=${BUDGET:-510}
WORKLOADS=${WORKLOADS:-input optimizer host padding launch compute}
STRENGTHS=${STRENGTHS:-1 0.5}
PY=${PYTHON:-python3}
cpu=()
[[ ${CPU:-0} == 1 ]] && cpu=(--cpu)
mkdir -p "$OUT/doctor"
rm -f "$OUT"/doctor/*.json "$OUT"/doctor/*.log "$OUT"/doctor/*.svg "$OUT/doctor_summary.md"
$PY -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA")' 2>&1 | tee "$OUT/versions.txt"
$PY -c 'import pynvml; pynvml.nvmlInit(); print("pynvml, driver", pynvml.nvmlSystemGetDriverVersion())' 2>&1 | tail -1 | tee -a "$OUT/versions.txt"

t0=$SECONDS
for run in $(seq "$RUNS"); do
	for w in $WORKLOADS; do
		for s in $STRENGTHS; do
			tag=${w}_s${s}_r${run}
			if ((SECONDS - t0 > BUDGET)); then
				echo "$tag: not run (suite budget of $BUDGET s spent)" | tee "$OUT/doctor/$tag.log"
				continue
			fi
			report=()
			[[ $run == 1 ]] && report=(--report "$OUT/doctor/$tag.svg")
			t=$SECONDS
			timeout 90 "$G" doctor --skip-steps "$SKIP" --profile "$PROFILE" --json --out "$OUT/doctor/$tag.json" "${report[@]}" -- \
				$PY bench/doctor_workloads.py "$w" --strength "$s" --seconds "$SECS" --skip "$SKIP" "${cpu[@]}" \
				--nvml-out "$OUT/doctor/$tag.nvml.json" > "$OUT/doctor/$tag.log" 2>&1
			rc=$?
			echo "$tag: exit $rc after $((SECONDS - t)) s: $(grep -m1 '^cause:' "$OUT/doctor/$tag.log" || echo 'no cause')"
		done
	done
done
echo "suite: $((SECONDS - t0)) s of runs"

$PY - "$OUT" "$RUNS" "$WORKLOADS" "$STRENGTHS" <<'PY' | tee "$OUT/doctor_summary.md"
import json, os, sys

out, runs, workloads, strengths = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
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
PY
