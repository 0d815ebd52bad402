#!/usr/bin/env bash
# Issue 18: two gload binaries side by side on the GPU machine, the base (gload-base.gz) and the candidate (gload.gz),
# first the engine alone (llama3, the Go-source corpus x5, --passes 2, GOMAXPROCS = workers: the candidate at 1, 2, 4,
# 8, 16 workers for the scaling plot, the base at 1 and 16), then each tokenizing the 10 GB corpus (the Go-source
# corpus x250, JSONL, from the page cache) at 16 workers, alternately (new, base, new, base into the local disk; new,
# base into /dev/shm), so host noise falls on both. About 7 minutes. bench/device.sh tokenize ab, with
# build/devrun made by bench/prepare_devrun.sh --base COMMIT (gload-base.gz). Writes ab.txt and scaling.jsonl to $OUT; each run's line
# comes from bench/timed_tokenize.py, each disk run's gload.index SHA-256 prefix follows it (the two must agree).
# SCALING="1 16" and ROUNDS=1 make a shorter call (about 3 minutes).
set -uo pipefail
. bench/lib.sh
unpack gload-base
CLEAN+=(/dev/shm/gload-sink-ds)
run() { # label binary out
	rm -rf "$3"
	python3 bench/timed_tokenize.py "$1" "$W/go10g.jsonl" "$d/$2" tokenize --tokenizer $d/llama3.json.gz --out "$3" "$W/go10g.jsonl"
	[[ $3 == "$W/ds" ]] && sha256sum "$3/gload.index" | cut -c1-16
	rm -rf "$3"
}
{
nproc
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
echo "== engine scaling, llama3, corpus x5, --passes 2 $(date -u +%T)"
for n in ${SCALING:-1 2 4 8 16}; do
	GOMAXPROCS=$n $G encode --bench --passes 2 --tokenizer $d/llama3.json.gz --workers $n < "$W/go5.jsonl" 2>/dev/null | grep '^{' | tee -a "$OUT/scaling.jsonl"
done
echo "== base engine, 1 and 16 workers, and the candidate at 1 again $(date -u +%T)"
for n in 1 16; do
	echo -n "base $n: "; GOMAXPROCS=$n $d/gload-base encode --bench --passes 2 --tokenizer $d/llama3.json.gz --workers $n < "$W/go5.jsonl" 2>/dev/null | grep '^{'
done
echo -n "candidate 1: "; GOMAXPROCS=1 $G encode --bench --passes 2 --tokenizer $d/llama3.json.gz --workers 1 < "$W/go5.jsonl" 2>/dev/null | grep '^{'
for i in $(seq 25); do cat "$W/go.jsonl"; done > "$W/go1g.jsonl"
for i in $(seq 10); do cat "$W/go1g.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go1g.jsonl" "$W/go5.jsonl"
cat "$W/go10g.jsonl" > /dev/null
echo "== 10 GB, 16 workers, alternately $(date -u +%T)"
for round in $(seq ${ROUNDS:-2}); do
	run "disk, candidate, round $round" gload "$W/ds"
	run "disk, base,      round $round" gload-base "$W/ds"
done
run "/dev/shm, candidate" gload /dev/shm/gload-sink-ds
run "/dev/shm, base     " gload-base /dev/shm/gload-sink-ds
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/ab.txt"
