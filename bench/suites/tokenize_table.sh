#!/usr/bin/env bash
# Issue 18's whole table on the GPU machine (16 cores), in one call of about 7 minutes: the engine alone against its
# own one-core speed (llama3 on the Go-source corpus x5, GOMAXPROCS = workers, default GC), HF tokenizers side by side
# on a slice (1 and 16 threads, same run), llama2 (SentencePiece-style BPE) and bert (WordPiece) and the multilingual
# text corpus at 1 and 16 workers, then `gload tokenize` end to end at 16 workers: 1 GB of each tokenizer / corpus,
# and one .gz input (the 10 GB corpus: bench/device.sh tokenize 10g, a call of its own). Each line is one JSON object (engine) or one summary
# line (end to end, with peak RSS).
#
# bench/device.sh tokenize [table], with build/devrun made by bench/prepare_devrun.sh --text-corpus (multi.jsonl.gz). Writes engine.jsonl, hf.txt, e2e.txt to $OUT.
set -uo pipefail
. bench/lib.sh
CLEAN+=(/dev/shm/gload-tok-ds)
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
gunzip -c $d/multi.jsonl.gz > "$W/multi.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
lscpu | grep -E '^(CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L3)' | tr -s ' ' > "$OUT/host.txt"
engine() { # label tokenizer corpus workers [env...]
	local label=$1 tok=$2 corpus=$3 w=$4; shift 4
	env GOMAXPROCS=$w "$@" $G encode --bench --passes ${PASSES:-2} --tokenizer "$tok" --workers "$w" < "$corpus" 2>/dev/null | tail -1 |
		python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r["label"]=sys.argv[1]; r["gomaxprocs"]=int(sys.argv[2]); print(json.dumps(r))' "$label" "$w"
}
echo "== engine $(date -u +%T)"
{
# one worker again after the sweep: the first run on a cold host can read low (bench/plot_scaling.py takes the best)
for w in 1 2 4 8 16 1; do engine "llama3 go-source x5" $d/llama3.json.gz "$W/go5.jsonl" $w; done
engine "llama3 go-source x5 GOGC=400" $d/llama3.json.gz "$W/go5.jsonl" 16 GOGC=400
for t in llama2 bert; do for w in 1 16; do engine "$t go-source x5" $d/$t.json.gz "$W/go5.jsonl" $w; done; done
for w in 1 16; do engine "llama3 multilingual" $d/llama3.json.gz "$W/multi.jsonl" $w; done
# One long pass over the corpus x25 (1 GB), 16 and 1 workers twice: at --passes 2 over x5 a 16-worker pass lasts
# ~0.25 s and ends with some workers idle on the corpus's largest documents (3 MB; workers_busy says how many).
for i in 1 2 3 4 5; do cat "$W/go5.jsonl"; done > "$W/go25.jsonl"
for w in 16 1 16 1; do PASSES=1 engine "llama3 go-source x25, one pass" $d/llama3.json.gz "$W/go25.jsonl" $w; done
rm -f "$W/go25.jsonl"
} | tee "$OUT/engine.jsonl"
echo "== HF side by side (llama3, 10 MB slice, same run) $(date -u +%T)"
head -c 10000000 "$W/go.jsonl" | head -n -1 > "$W/go10m.jsonl"
python3 bench/tokenizer.py --gload $G --tokenizer $d/llama3.json.gz --corpus "$W/go10m.jsonl" --threads 1,16 --passes 1 \
	2>&1 | tail -8 | tee "$OUT/hf.txt"
e2e() { # label input tokenizer [args...]
	local label=$1 in=$2 tok=$3; shift 3
	rm -rf "$W/ds"
	python3 bench/timed_tokenize.py "$label" "${RATE_OF:-$in}" $G tokenize --tokenizer "$tok" --out "$W/ds" "$@" "$in"
	rm -rf "$W/ds"
}
echo "== end to end $(date -u +%T)"
{
for i in $(seq 25); do cat "$W/go.jsonl"; done > "$W/go1g.jsonl"
e2e "llama3 go-source 1 GB, 16 workers" "$W/go1g.jsonl" $d/llama3.json.gz
e2e "llama2 go-source 1 GB, 16 workers" "$W/go1g.jsonl" $d/llama2.json.gz
e2e "bert go-source 1 GB, 16 workers" "$W/go1g.jsonl" $d/bert.json.gz
n=$(( 1000000000 / $(stat -c %s "$W/multi.jsonl") + 1 ))
for i in $(seq $n); do cat "$W/multi.jsonl"; done > "$W/multi1g.jsonl"
e2e "llama3 multilingual ~1 GB, 16 workers" "$W/multi1g.jsonl" $d/llama3.json.gz
rm -f "$W/multi1g.jsonl"
head -c 400000000 "$W/go1g.jsonl" | head -n -1 > "$W/go400m.jsonl"
gzip -1 -c "$W/go400m.jsonl" > "$W/go400m.jsonl.gz"
RATE_OF="$W/go400m.jsonl" e2e "llama3 one 400 MB-of-JSONL .gz input, 16 workers (MB/s of JSONL)" "$W/go400m.jsonl.gz" $d/llama3.json.gz
rm -f "$W/go400m.jsonl.gz" "$W/go400m.jsonl"
} 2>&1 | tee "$OUT/e2e.txt"
# The 10 GB corpus takes a call of its own: bench/device.sh tokenize 10g.
echo "== done $(date -u +%T)"
