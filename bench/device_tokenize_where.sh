#!/usr/bin/env bash
# Issue 18, seventh pass: where a 16-core run of the candidate (gload.gz) spends its time once the engine got faster
# per core. The engine (llama3, Go-source corpus x5, --passes 2) at 1 and 16 workers with its workers_busy share
# (1: no worker idled before the pass ended), the same on the corpus x25 in one pass (a long pass: a document at the
# end weighs less), a CPU profile of the engine at 16 workers, then `gload tokenize` of the 10 GB corpus at 16
# workers into the local disk and into /dev/shm, each with a CPU profile (the summary's stages line says how much of
# the writer's time went to waiting for the previous shard's close). About 3 minutes. Carry build/devrunS
# (bench/prepare_devrun_ab.sh). Writes where.txt and cpu-*.pprof to $OUT.
set -uo pipefail
d=${DEVRUN:-build/devrunS}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
G=$d/gload T=$d/llama3.json.gz
W=$(mktemp -d /tmp/gload-where.XXXXXX)
trap 'rm -rf "$W" /dev/shm/gload-where-ds' EXIT
{
lscpu | grep -E 'Model name|^CPU\(s\)|L1d|L2|L3|MHz' | tr -s ' '
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
echo "== engine, corpus x5, --passes 2 $(date -u +%T)"
for n in 1 16 1 16; do
	GOMAXPROCS=$n $G encode --bench --passes 2 --tokenizer $T --workers $n < "$W/go5.jsonl" 2>/dev/null | grep '^{'
done
for i in 1 2 3 4 5; do cat "$W/go5.jsonl"; done > "$W/go25.jsonl"
echo "== engine, corpus x25, --passes 1 $(date -u +%T)"
for n in 16 1; do
	GOMAXPROCS=$n $G encode --bench --passes 1 --tokenizer $T --workers $n < "$W/go25.jsonl" 2>/dev/null | grep '^{'
done
GOMAXPROCS=16 $G encode --cpuprofile "$OUT/cpu-engine16.pprof" --bench --passes 2 --tokenizer $T --workers 16 < "$W/go5.jsonl" > /dev/null 2>&1
for i in 1 2 3 4 5 6 7 8 9 10; do cat "$W/go25.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go5.jsonl" "$W/go25.jsonl"
cat "$W/go10g.jsonl" > /dev/null
echo "== 10 GB, 16 workers, with CPU profiles $(date -u +%T)"
rm -rf "$W/ds"
python3 bench/timed_tokenize.py "disk" "$W/go10g.jsonl" $G tokenize --cpuprofile "$OUT/cpu-e2e-disk.pprof" --tokenizer $T --out "$W/ds" "$W/go10g.jsonl"
sha256sum "$W/ds/gload.index" | cut -c1-16
rm -rf "$W/ds"
python3 bench/timed_tokenize.py "/dev/shm" "$W/go10g.jsonl" $G tokenize --cpuprofile "$OUT/cpu-e2e-shm.pprof" --tokenizer $T --out /dev/shm/gload-where-ds "$W/go10g.jsonl"
rm -rf /dev/shm/gload-where-ds
python3 bench/timed_tokenize.py "disk, no profile" "$W/go10g.jsonl" $G tokenize --tokenizer $T --out "$W/ds" "$W/go10g.jsonl"
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/where.txt"
