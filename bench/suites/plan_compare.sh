#!/usr/bin/env bash
# Issue 38's planning comparison where 10^9 rows fit (the references need about 53 GiB for Mosaic and 30 GiB for
# Megatron there): bench/plan_compare.py, gload bench plan (exact and lazy, bucketed) against Mosaic streaming's
# per-epoch partition and shuffle and Megatron-core's GPTDataset index build, at ROWS (default 1e8,1e9).
# bench/device.sh plan_compare [ROWS], with build/devrun made by bench/prepare_devrun.sh --plan-compare (the
# references' wheels for Python 3.12 in whl-bench, installed without dependencies over the machine's torch, numpy
# and transformers). PYTHON=... uses that interpreter instead (no venv; how the suite is smoke-tested on the build
# machine). MEM_GB (default 100) is every run's address-space limit. Writes plan_compare.md (the table) and
# plan_compare.jsonl (one line per run, as each ends, so a call cut off at 600 s keeps what finished) to $OUT.
set -uo pipefail
. bench/lib.sh
rows=${1:-1e8,1e9}
py=${PYTHON:-}
if [[ -z $py ]]; then
	py=python3
	if compgen -G "$d/whl-bench/*.whl" >/dev/null; then
		python3 -m venv --system-site-packages "$W/venv-bench" &&
			"$W/venv-bench/bin/pip" install -q --no-index --no-deps "$d"/whl-bench/*.whl 2>&1 | tail -3
		py=$W/venv-bench/bin/python
	else
		echo "no $d/whl-bench: run bench/prepare_devrun.sh --plan-compare (the references will not import)"
	fi
fi
"$py" -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__)'
echo "cores $(nproc); $(free -g | awk '/^Mem:/ {print $2 " GiB memory"}'); $(uptime)"
"$py" bench/plan_compare.py --gload "$G" --rows "$rows" --mem-limit-gb "${MEM_GB:-100}" \
	--json "$OUT/plan_compare.jsonl" --megatron-save "$W/npy" | tee "$OUT/plan_compare.md"
