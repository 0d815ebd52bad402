#!/usr/bin/env bash
# Issue 6 proof on the GPU machine: train_ref.py fed three ways — naive, workers (both through the reported feeds of
# bench/train_feed.py, so gload's watch sees their waits) and gload (feed) — each wrapped in `gload bench run`
# against a running `gload serve`; plus train_ref's own pretok / ideal / feed at --pad-multiple 128 and feed with
# automatic boundaries (GLOAD_AUTO_BUCKETS=8). Expected verdicts: starved: data, starved: data, fed; gload's SM
# median and P10 within ±5 points of train_ref's pynvml sampling.
#
# bench/device.sh train (about 4-6 minutes). Writes to $OUT: bench_<mode>.json (gload bench run), train_<mode>.jsonl
# (train_ref rows), plots, logs, summary.txt.
set -euo pipefail
. bench/lib.sh
STEPS=${STEPS:-150}
WARMUP=${WARMUP:-10}
rm -f "$OUT"/train_*.jsonl "$OUT"/exits.txt
python3 -c 'import torch, grpc, google.protobuf as p, pynvml; print("torch", torch.__version__, torch.cuda.get_device_name(0), "grpcio", grpc.__version__, "protobuf", p.__version__)' | tee "$OUT/versions.txt"

# Tokenize as train_ref does (encode with special tokens, rows cut at --seq 1024 tokens).
tokenize_corpus
$G inspect "$W/data" | tee "$OUT/dataset.txt"

# One server for every run; its watch window outlasts any run, so client figures are exact over each span.
serve_corpus --metrics 127.0.0.1:9400 --watch-window 600s
$G watch --addr "$ADDR" --once | tee "$OUT/watch_start.txt"

export PYTHONPATH=$PWD/pyclient:$PWD/bench GLOAD_ADDR=$ADDR GLOAD_DATASET=corpus GLOAD_TRANSPORT=${GLOAD_TRANSPORT:-shm}
TR=(python3 $d/train_ref.py --corpus "$W/corpus.jsonl" --tokenizer "$W/tokenizer.json" --steps "$STEPS" --warmup "$WARMUP")

# The three feeding modes under gload's watch. --skip-steps leaves train_ref's warm-up steps out of gload's span,
# as train_ref leaves them out of its own figures.
for mode in naive workers feed; do
	fn=$mode
	[[ $mode == feed ]] || fn=${mode}_reported
	echo "== $mode (train_feed:$fn)"
	rc=0
	$G bench run --addr "$ADDR" --json --out "$OUT/bench_$mode.json" --plot "$OUT/bench_$mode.svg" \
		--trace "$OUT/trace_$mode.jsonl" --skip-steps "$WARMUP" -- \
		"${TR[@]}" --modes feed --feed "train_feed:$fn" --json "$OUT/train_$mode.jsonl" 2>&1 | tee "$OUT/run_$mode.txt" || rc=$?
	echo "$mode exit $rc" | tee -a "$OUT/exits.txt"
done
curl -s 127.0.0.1:9400/metrics | grep -E '^gload_(gpu|watch)_' > "$OUT/metrics.txt" || true

# train_ref's own modes beside gload at the same padding, and gload with automatic boundaries.
echo "== pretok, ideal, feed at --pad-multiple 128"
"${TR[@]}" --modes pretok,ideal,feed --feed train_feed:feed --pad-multiple 128 --json "$OUT/train_pad128.jsonl" \
	2>&1 | tee "$OUT/train_pad128.txt" || echo "pad128 exit $?" | tee -a "$OUT/exits.txt"
echo "== feed with GLOAD_AUTO_BUCKETS=8"
GLOAD_AUTO_BUCKETS=8 "${TR[@]}" --modes feed --feed train_feed:feed --json "$OUT/train_auto8.jsonl" \
	2>&1 | tee "$OUT/train_auto8.txt" || echo "auto8 exit $?" | tee -a "$OUT/exits.txt"

python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys

out = sys.argv[1]


def rows(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def bench(mode):
    path = os.path.join(out, f"bench_{mode}.json")
    return json.load(open(path)) if os.path.exists(path) else None


want = {"naive": "starved: data", "workers": "starved: data", "feed": "fed"}
lines = [("mode", "step ms", "data wait", "tokens/s", "pad", "SM med/P10 (train_ref)", "SM med/P10 (gload)",
          "gload wait", "verdict", "check")]
ok = True
for mode in ("naive", "workers", "feed"):
    t = rows(f"train_{mode}.jsonl")
    b = bench(mode)
    t = t[-1] if t else {}
    gpu = (b or {}).get("report", {}).get("devices") or [{}]
    g = gpu[0]
    clients = (b or {}).get("report", {}).get("clients") or []
    verdict = (b or {}).get("report", {}).get("verdict", {}).get("state", "-")
    checks = []
    if verdict != want[mode]:
        checks.append(f"verdict != {want[mode]}")
    if t and g:
        for k, gk in (("sm_median", "sm_median"), ("sm_p10", "sm_p10")):
            if abs(t[k] - g.get(gk, 1e9)) > 5:
                checks.append(f"{k} differs by {abs(t[k] - g.get(gk, 0)):.1f}")
    ok = ok and not checks
    lines.append((
        mode + ("" if mode == "feed" else "*"),
        f"{t['step_ms']:.1f}" if t else "-", f"{t['data_wait_pct']:.1f}%" if t else "-",
        f"{t['tokens_per_s'] / 1e3:.0f}k" if t else "-", f"{t['pad_pct']:.1f}%" if t else "-",
        f"{t['sm_median']:.0f} / {t['sm_p10']:.0f}" if t else "-",
        f"{g['sm_median']:.0f} / {g['sm_p10']:.0f}" if "sm_median" in g else "-",
        ", ".join(f"{c['client']} {100 * c['wait_share']:.1f}%" for c in clients) or "-",
        verdict, "ok" if not checks else "; ".join(checks)))
for name, label in (("train_pad128.jsonl", "{mode} (pad 128)"), ("train_auto8.jsonl", "{mode} (auto 8)")):
    for t in rows(name):
        lines.append((label.format(mode=t["mode"]), f"{t['step_ms']:.1f}", f"{t['data_wait_pct']:.1f}%",
                      f"{t['tokens_per_s'] / 1e3:.0f}k", f"{t['pad_pct']:.1f}%",
                      f"{t['sm_median']:.0f} / {t['sm_p10']:.0f}", "-", "-", "-", ""))
print("| " + " | ".join(lines[0]) + " |")
print("|" + "---|" * len(lines[0]))
for l in lines[1:]:
    print("| " + " | ".join(l) + " |")
print("* through bench/train_feed.py's reported feeds (train_ref's DataLoader, steps sent to gload's Report RPC)")
print("proof:", "PASS" if ok else "FAIL")
PY
