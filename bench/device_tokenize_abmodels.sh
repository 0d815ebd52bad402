#!/usr/bin/env bash
# Issue 18: the base and the candidate of bench/device_tokenize_ab.sh with llama2 (SentencePiece-style BPE) and bert
# (WordPiece): the engine at 1 and 16 workers on the Go-source corpus (40 MB, --passes 2), then `gload tokenize` of
# 1 GB (the corpus x25) into /dev/shm at 16 workers, alternately. About 3 minutes. Carry build/devrunS with
# llama2.json.gz and bert.json.gz added (bench/prepare_devrun_ab.sh copies them). Writes abmodels.txt to $OUT.
set -uo pipefail
d=${DEVRUN:-build/devrunS}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for b in gload gload-base; do [[ -x $d/$b ]] || { gunzip -kf $d/$b.gz && chmod +x $d/$b; }; done
W=$(mktemp -d /tmp/gload-models.XXXXXX)
trap 'rm -rf "$W" /dev/shm/gload-models-ds' EXIT
{
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in $(seq 25); do cat "$W/go.jsonl"; done > "$W/go1g.jsonl"
for tok in llama2 bert; do
	echo "== $tok $(date -u +%T)"
	for b in gload gload-base; do for n in 1 16; do
		echo -n "$b engine $n: "; GOMAXPROCS=$n $d/$b encode --bench --passes 2 --tokenizer $d/$tok.json.gz --workers $n < "$W/go.jsonl" 2>/dev/null | grep -o '"mb_per_s":[0-9.]*'
	done; done
	for b in gload gload-base; do
		rm -rf /dev/shm/gload-models-ds
		python3 bench/timed_tokenize.py "$b $tok 1 GB to /dev/shm" "$W/go1g.jsonl" "$d/$b" tokenize --tokenizer $d/$tok.json.gz --out /dev/shm/gload-models-ds "$W/go1g.jsonl"
	done
done
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/abmodels.txt"
