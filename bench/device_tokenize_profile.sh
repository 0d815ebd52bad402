#!/usr/bin/env bash
# Issue 18, first call: where does tokenizing stop scaling on the GPU machine's 16 cores? Engine alone (encode
# --bench) at 1 and 16 workers under several GC settings, end-to-end tokenize of 1 GB, CPU profiles of both, GC
# traces, and the single-stream decompressors. Carry build/devrun-h1 (gload.gz, llama3.json.gz, corpus.jsonl.gz).
set -uo pipefail
d=build/devrun-h1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
gunzip -kf $d/corpus.jsonl.gz
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
G=$d/gload T=$d/llama3.json.gz
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L3' | tee "$OUT/lscpu.txt"
for i in 1 2 3 4 5; do cat $d/corpus.jsonl; done > /tmp/c5.jsonl
bench() { # label env... : one encode --bench line
	local label=$1; shift
	echo "== $label" ; env "$@" $G encode --bench --passes 2 --tokenizer $T --workers ${W:-16} < ${IN:-/tmp/c5.jsonl} 2>&1 | tail -1
}
{
W=1 IN=$d/corpus.jsonl bench "engine w1 GOMAXPROCS=1" GOMAXPROCS=1
W=2 IN=$d/corpus.jsonl bench "engine w2" GOMAXPROCS=2
W=4 bench "engine w4" GOMAXPROCS=4
W=8 bench "engine w8" GOMAXPROCS=8
bench "engine w16 GOGC=100" GOGC=100
bench "engine w16 GOGC=400" GOGC=400
bench "engine w16 GOGC=off GOMEMLIMIT=3GiB" GOGC=off GOMEMLIMIT=3GiB
} 2>&1 | tee "$OUT/engine.txt"
GODEBUG=gctrace=1 $G encode --bench --passes 1 --tokenizer $T --workers 16 < /tmp/c5.jsonl 2> "$OUT/gctrace-engine.txt" >/dev/null
echo "GCs during engine w16: $(grep -c '^gc ' "$OUT/gctrace-engine.txt")" | tee -a "$OUT/engine.txt"
$G encode --cpuprofile "$OUT/cpu-engine16.pprof" --bench --passes 1 --tokenizer $T --workers 16 < /tmp/c5.jsonl > /dev/null 2>&1
rm -f /tmp/c5.jsonl
for i in $(seq 25); do cat $d/corpus.jsonl; done > /tmp/c25.jsonl
e2e() { # label args...: wall time, MB/s of JSONL, peak RSS of the child
	local label=$1; shift
	rm -rf /tmp/ds
	python3 - "$label" "$@" <<'PY'
import os, resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[2:], capture_output=True, text=True)
secs = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
size = os.path.getsize("/tmp/c25.jsonl") / 1e6
summary = " ".join(l.strip() for l in r.stdout.splitlines() if "documents" in l or "throughput" in l)
print(f"== {sys.argv[1]}: rc={r.returncode} {secs:.1f} s, {size / secs:.0f} MB/s, peak RSS {rss:.0f} MiB | {summary} {r.stderr[-200:] if r.returncode else ''}")
PY
}
{
e2e "tokenize 1 GB w16 default" $G tokenize --tokenizer $T --out /tmp/ds /tmp/c25.jsonl
e2e "tokenize 1 GB w16 GOGC=400" env GOGC=400 $G tokenize --tokenizer $T --out /tmp/ds /tmp/c25.jsonl
e2e "tokenize 1 GB w16 --memory-limit 4GiB" $G tokenize --tokenizer $T --memory-limit 4GiB --out /tmp/ds /tmp/c25.jsonl
e2e "tokenize 1 GB w8" $G tokenize --tokenizer $T --workers 8 --out /tmp/ds /tmp/c25.jsonl
} 2>&1 | tee "$OUT/e2e.txt"
rm -rf /tmp/ds
GODEBUG=gctrace=1 $G tokenize --quiet --tokenizer $T --out /tmp/ds /tmp/c25.jsonl 2> "$OUT/gctrace-e2e.txt" >/dev/null
echo "GCs during e2e: $(grep -c '^gc ' "$OUT/gctrace-e2e.txt")" | tee -a "$OUT/e2e.txt"
rm -rf /tmp/ds
$G tokenize --cpuprofile "$OUT/cpu-e2e16.pprof" --memprofile "$OUT/mem-e2e16.pprof" --quiet --tokenizer $T --out /tmp/ds /tmp/c25.jsonl >/dev/null 2>&1
rm -rf /tmp/ds
# Single-stream decompressors: how fast one gzip / zstd reader can feed the pipeline.
head -c 400000000 /tmp/c25.jsonl > /tmp/c10.jsonl
{
gzip -1 -c /tmp/c10.jsonl > /tmp/c10.jsonl.gz
t0=$(date +%s.%N); gzip -dc /tmp/c10.jsonl.gz > /dev/null; t1=$(date +%s.%N)
echo "gzip -dc: $(python3 -c "print(f'{400/($t1-$t0):.0f} MB/s')")"
rm -rf /tmp/ds; t0=$(date +%s.%N); $G tokenize --quiet --tokenizer $T --out /tmp/ds /tmp/c10.jsonl.gz >/dev/null 2>&1; t1=$(date +%s.%N)
echo "tokenize .gz 400 MB: $(python3 -c "print(f'{400/($t1-$t0):.0f} MB/s')")"
rm -rf /tmp/ds; t0=$(date +%s.%N); $G tokenize --quiet --tokenizer $T --out /tmp/ds /tmp/c10.jsonl >/dev/null 2>&1; t1=$(date +%s.%N)
echo "tokenize plain 400 MB: $(python3 -c "print(f'{400/($t1-$t0):.0f} MB/s')")"
if command -v zstd >/dev/null; then
	zstd -q -1 -T16 -c /tmp/c10.jsonl > /tmp/c10.jsonl.zst
	rm -rf /tmp/ds; t0=$(date +%s.%N); $G tokenize --quiet --tokenizer $T --out /tmp/ds /tmp/c10.jsonl.zst >/dev/null 2>&1; t1=$(date +%s.%N)
	echo "tokenize .zst 400 MB: $(python3 -c "print(f'{400/($t1-$t0):.0f} MB/s')")"
fi
} 2>&1 | tee "$OUT/decompress.txt"
rm -rf /tmp/ds /tmp/c25.jsonl /tmp/c10.jsonl*
