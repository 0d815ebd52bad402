#!/usr/bin/env bash
# Issue 18's end-to-end target on the GPU machine: `gload tokenize` of the 10 GB corpus (the Go-source corpus x250,
# JSONL, one file, from the page cache) into an Arrow dataset on the local disk, 16 workers, default flags; wall time,
# MB/s of JSONL, peak RSS and the run's own summary. About 2 minutes. bench/device.sh tokenize 10g.
# Writes tokenize10g.txt to $OUT.
set -uo pipefail
. bench/lib.sh
{
df -h /tmp | tail -1
echo "== building the corpus $(date -u +%T)"
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in $(seq 25); do cat "$W/go.jsonl"; done > "$W/go1g.jsonl"
for i in $(seq 10); do cat "$W/go1g.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go1g.jsonl"
cat "$W/go10g.jsonl" > /dev/null # in the page cache
echo "== tokenize $(date -u +%T)"
python3 bench/timed_tokenize.py "llama3 go-source 10 GB, 16 workers" "$W/go10g.jsonl" $G tokenize --tokenizer $d/llama3.json.gz --out "$W/ds" "$W/go10g.jsonl"
du -sh "$W/ds"
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/tokenize10g.txt"
