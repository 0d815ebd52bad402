#!/usr/bin/env bash
# Issue 39 proof on the GPU machine: `gload doctor` names the one known cause of each induced workload of
# bench/doctor_workloads.py (input-starved, non-fused optimizer over many small tensors, a host sync and host work
# every step, uneven lengths padded per batch, a tiny launch-bound model, large bf16 matmuls), at full strength and
# with the effect halved, RUNS times each (round-robin, so a cut-short call still covers every workload); and gload's
# SM median/P10 against an independent pynvml sampler over the same steps (±5 points).
#
# bench/device.sh doctor (about 7-8 minutes: 36 runs of ~12 s; no run starts or outlives BUDGET seconds, default 530).
# Knobs: RUNS (3), SECS (5: counted seconds per run), SKIP (8 warm-up steps), PROFILE (3:3: the profiler window, inside
# the warm-up so its cost stays out of the judged span), WORKLOADS, STRENGTHS ("1 0.5"), PYTHON (python3), CPU=1 (a
# smoke test of the suite on a machine without a GPU). Writes to $OUT: doctor/<workload>_s<strength>_r<run>.{json,
# nvml.json,log} (report SVGs for run 1), doctor_summary.md (the results table of bench/doctor_summary.py, which
# can be rerun on fetched results: python3 bench/doctor_summary.py OUT [RUNS WORKLOADS STRENGTHS]), versions.txt.
set -uo pipefail
. bench/lib.sh
RUNS=${RUNS:-3}
SECS=${SECS:-5}
SKIP=${SKIP:-8}
PROFILE=${PROFILE:-3:3}
BUDGET=${BUDGET:-530}
WORKLOADS=${WORKLOADS:-input optimizer host padding launch compute}
STRENGTHS=${STRENGTHS:-1 0.5}
PY=${PYTHON:-python3}
cpu=()
[[ ${CPU:-0} == 1 ]] && cpu=(--cpu)
"$G" doctor --help > /dev/null 2>&1 || { echo "doctor: $G has no 'gload doctor': rebuild $d (bench/prepare_devrun.sh)" >&2; exit 2; }
mkdir -p "$OUT/doctor"
rm -f "$OUT"/doctor/*.json "$OUT"/doctor/*.log "$OUT"/doctor/*.svg "$OUT/doctor_summary.md"
$PY -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA")' 2>&1 | tee "$OUT/versions.txt"
$PY -c 'import pynvml; pynvml.nvmlInit(); print("pynvml, driver", pynvml.nvmlSystemGetDriverVersion())' 2>&1 | tail -1 | tee -a "$OUT/versions.txt"

t0=$SECONDS
for run in $(seq "$RUNS"); do
	for w in $WORKLOADS; do
		for s in $STRENGTHS; do
			tag=${w}_s${s}_r${run}
			left=$((BUDGET - (SECONDS - t0)))
			if ((left < 25)); then
				echo "$tag: not run (suite budget of $BUDGET s spent)" | tee "$OUT/doctor/$tag.log"
				continue
			fi
			report=()
			[[ $run == 1 ]] && report=(--report "$OUT/doctor/$tag.svg")
			t=$SECONDS
			timeout $((left < 60 ? left : 60)) "$G" doctor --skip-steps "$SKIP" --profile "$PROFILE" --json --out "$OUT/doctor/$tag.json" "${report[@]}" -- \
				$PY bench/doctor_workloads.py "$w" --strength "$s" --seconds "$SECS" --skip "$SKIP" "${cpu[@]}" \
				--nvml-out "$OUT/doctor/$tag.nvml.json" > "$OUT/doctor/$tag.log" 2>&1
			rc=$?
			echo "$tag: exit $rc after $((SECONDS - t)) s: $(grep -m1 '^cause:' "$OUT/doctor/$tag.log" || echo 'no cause')"
		done
	done
done
echo "suite: $((SECONDS - t0)) s of runs"

$PY bench/doctor_summary.py "$OUT" "$RUNS" "$WORKLOADS" "$STRENGTHS" | tee "$OUT/doctor_summary.md"
