#!/usr/bin/env bash
# Issue 18: is the engine's ceiling on 16 cores in gload's process (runtime, GC, shared state, a serial stage) or in
# the machine (core clock under all-core load, shared cache, memory bandwidth)? One call of about 4 minutes:
#   1. the engine (llama3, Go-source corpus x5) as ONE process with N workers against N INDEPENDENT one-core
#      processes started at once (nothing shared but the machine), N = 1, 4, 8, 16: if the independent processes
#      slow down as much as the workers do, the limit is the machine's;
#   2. what the machine alone does under the same load: a pure-compute loop (no memory traffic) and a
#      memory-bound copy (numpy, 256 MiB arrays), 1 and 16 copies at once;
#   3. CPU profiles: the engine at 16 workers, `gload tokenize` of 1 GB at 16 workers (output on disk and in
#      /dev/shm: does writing cost?).
# N_LIST="1 16 1 16" repeats sizes; PROFILES=0 leaves out part 3 (about 2 minutes then). Carry build/devrunP (bench/prepare_devrun18.sh with DEVRUN_DIR=build/devrunP NO_TEXT_CORPUS=1). Writes
# hwlimit.txt, cpu-engine16.pprof, cpu-e2e16.pprof to $OUT.
set -uo pipefail
d=${DEVRUN:-build/devrunP}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
G=$d/gload T=$d/llama3.json.gz
W=$(mktemp -d /tmp/gload-hw.XXXXXX)
trap 'rm -rf "$W" /dev/shm/gload-hw-ds' EXIT
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
mbps() { python3 -c 'import json,sys; print(sum(json.loads(l)["mb_per_s"] for l in sys.stdin if l.startswith("{")))'; }
{
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L3|MHz' | tr -s ' '
echo "== 1. engine: one process with N workers vs N independent one-core processes $(date -u +%T)"
for n in ${N_LIST:-1 4 8 16}; do
	GOMAXPROCS=$n $G encode --bench --passes 2 --tokenizer $T --workers $n < "$W/go5.jsonl" 2>/dev/null | grep '^{' > "$W/one.json"
	one=$(mbps < "$W/one.json")
	steady=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("steady_mb_per_s", "?"))' "$W/one.json")
	for i in $(seq $n); do
		GOMAXPROCS=1 $G encode --bench --passes 2 --tokenizer $T --workers 1 < "$W/go5.jsonl" > "$W/p$i.json" 2>/dev/null &
	done
	wait
	indep=$(cat "$W"/p*.json | mbps)
	rm -f "$W"/p*.json
	echo "N=$n: one process $one MB/s (steady, before its first worker ran out of documents: $steady); $n independent processes together $indep MB/s"
done
echo "== 2. the machine alone: compute loop and memory copy, 1 and 16 at once $(date -u +%T)"
cat > "$W/compute.py" <<'PY'
import time
t = time.perf_counter(); x = 0
for i in range(20_000_000): x += i ^ (i >> 3)
print(f"{time.perf_counter() - t:.3f}")
PY
cat > "$W/membw.py" <<'PY'
import time, numpy as np
a = np.ones(1 << 25); b = np.empty_like(a)  # 256 MiB each
np.copyto(b, a); t = time.perf_counter()
for _ in range(10): np.copyto(b, a)
print(f"{10 * 2 * a.nbytes / (time.perf_counter() - t) / 1e9:.2f}")
PY
for prog in compute membw; do
	alone=$(python3 "$W/$prog.py")
	for i in $(seq 16); do python3 "$W/$prog.py" > "$W/q$i.txt" & done
	wait
	echo "$prog ($( [[ $prog == compute ]] && echo 'seconds, lower is better' || echo 'GB/s read+written per process')): alone $alone; 16 at once: $(cat "$W"/q*.txt | tr '\n' ' ')"
	rm -f "$W"/q*.txt
done
if [[ ${PROFILES:-1} == 1 ]]; then
echo "== 3. profiles $(date -u +%T)"
$G encode --cpuprofile "$OUT/cpu-engine16.pprof" --bench --passes 1 --tokenizer $T --workers 16 < "$W/go5.jsonl" 2>/dev/null
for i in $(seq 5); do cat "$W/go5.jsonl"; done > "$W/go1g.jsonl"
rm -f "$W/go5.jsonl"
size=$(stat -c %s "$W/go1g.jsonl")
for dest in "$W/ds" /dev/shm/gload-hw-ds; do
	rm -rf "$dest"
	t0=$(date +%s.%N)
	prof=()
	[[ $dest == "$W/ds" ]] && prof=(--cpuprofile "$OUT/cpu-e2e16.pprof")
	$G tokenize "${prof[@]}" --tokenizer $T --out "$dest" "$W/go1g.jsonl" 2>&1 | grep -E '^(documents|stages|bottleneck)' | tr -s ' '
	echo "tokenize $((size / 1000000)) MB, 16 workers, output in $dest: $(python3 -c "print(f'{$size / 1e6 / ($(date +%s.%N) - $t0):.0f}')") MB/s of input (wall, with profile when on disk)"
	rm -rf "$dest"
done
fi
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/hwlimit.txt"
