#!/usr/bin/env bash
# Issue 18: why an A/B moved as it did — the base and the candidate of bench/device_tokenize_ab.sh (carry the same
# build/devrunS) alternately: the engine at 1 worker three times each (llama3, corpus x5, --passes 2), then the 10 GB
# corpus into /dev/shm at 16 workers with GODEBUG=gctrace=1 under the default --memory-limit 768MiB and under 4GiB
# (GC cycles and their CPU summed from the trace). gload-mid.gz, if present, runs as a third. About 5 minutes
# (7 with three). Writes abgc.txt to $OUT.
set -uo pipefail
d=${DEVRUN:-build/devrunS}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bins="gload gload-base"
[[ -f $d/gload-mid.gz ]] && bins="gload gload-mid gload-base" # an optional third binary, e.g. half of the change
for b in $bins; do [[ -x $d/$b ]] || { gunzip -kf $d/$b.gz && chmod +x $d/$b; }; done
W=$(mktemp -d /tmp/gload-gc.XXXXXX)
trap 'rm -rf "$W" /dev/shm/gload-gc-ds' EXIT
gcsum() { # gctrace lines on stdin -> "N GCs, X s of GC CPU (assist+background+idle), last heap goal"
	python3 -c '
import re,sys
n=0; cpu=0.0; goal=""; live=0
for ln in sys.stdin:
    m=re.search(r"ms clock, ([0-9.+/]+) ms cpu, [0-9]+->[0-9]+->([0-9]+) MB, ([0-9]+) MB goal", ln)
    if not m: continue
    n+=1; cpu+=sum(float(x) for x in re.split(r"[+/]", m.group(1)) if x); goal=m.group(3); live=m.group(2)
print(f"{n} GCs, {cpu/1000:.1f} s of GC CPU, last live {live} MB, goal {goal} MB")'
}
{
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
echo "== engine, 1 worker, alternately $(date -u +%T)"
for r in 1 2 3; do for b in $bins; do
	echo -n "$b: "; GOMAXPROCS=1 $d/$b encode --bench --passes 2 --tokenizer $d/llama3.json.gz --workers 1 < "$W/go5.jsonl" 2>/dev/null | grep -o '"mb_per_s":[0-9.]*'
done; done
for i in $(seq 250); do cat "$W/go.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go5.jsonl"
echo "== 10 GB into /dev/shm, 16 workers, gctrace $(date -u +%T)"
for lim in 768MiB 4GiB; do for b in $bins; do
	rm -rf /dev/shm/gload-gc-ds
	s=$(date +%s.%N)
	GODEBUG=gctrace=1 $d/$b tokenize --memory-limit $lim --tokenizer $d/llama3.json.gz --out /dev/shm/gload-gc-ds "$W/go10g.jsonl" > "$W/sum.txt" 2> "$W/gc.txt"
	rc=$?
	e=$(date +%s.%N)
	mbs=$(awk -v b="$(stat -c %s "$W/go10g.jsonl")" -v s="$s" -v e="$e" 'BEGIN{printf "%.0f", b/1e6/(e-s)}')
	echo "$b --memory-limit $lim: rc=$rc $mbs MB/s | $(gcsum < "$W/gc.txt") | $(grep -E '^(stages|bottleneck)' "$W/sum.txt" | tr -s ' ' | tr '\n' ' ')"
done; done
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/abgc.txt"
