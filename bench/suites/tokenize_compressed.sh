#!/usr/bin/env bash
# Issue 18's compressed-input target on the GPU machine: one big .jsonl.gz or .jsonl.zst must not cap `gload tokenize`
# at one decompressor. The Go-source corpus x50 (2 GB of JSONL) as plain, as one gzip member (`gzip -1`, the case one
# core decodes), as BGZF and as framed zstd (`gload compress`: independent frames, decoded on up to 8 goroutines), and
# the 10 GB corpus (x250) framed both ways; 16 workers, default flags, datasets on the local disk. Every rate is MB/s
# of JSON Lines; each dataset's index (content hashes of every shard) is compared with the plain input's. About 8
# minutes. bench/device.sh tokenize compressed. Writes compressed.txt to $OUT.
set -uo pipefail
. bench/lib.sh
tok() { # LABEL PLAIN INPUT: tokenize INPUT, compare its index with the plain input's
	rm -rf "$W/ds"
	# --split-size above the file: the plain file is one piece too, as a compressed file always is, so all datasets
	# of one corpus must be the same bytes (a plain file over 1 GiB would otherwise start a shard per piece).
	python3 bench/timed_tokenize.py "$1" "$2" $G tokenize --tokenizer $d/llama3.json.gz --split-size 1TiB --out "$W/ds" "$3"
	if [[ -f $W/ref-$(basename "$2").index ]]; then
		cmp -s "$W/ds/gload.index" "$W/ref-$(basename "$2").index" && echo "   index identical to the plain input's" || echo "   INDEX DIFFERS from the plain input's"
	else
		cp "$W/ds/gload.index" "$W/ref-$(basename "$2").index"
	fi
}
timed() { # LABEL CMD...: wall time of a preparation step
	local l=$1 t=$EPOCHREALTIME; shift
	"$@" || echo "   FAILED: $*"
	echo "== $l: $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t }") s"
}
N2=${N2:-50} N10=${N10:-5} # copies: the 2 GB corpus, and of it for the 10 GB one (smaller for a dry run here)
{
nproc; df -h /tmp | tail -1
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in $(seq $N2); do cat "$W/go.jsonl"; done > "$W/go2g.jsonl"
cat "$W/go2g.jsonl" > /dev/null
if [[ -z ${ONLY_10G:-} ]]; then # ONLY_10G=1: the 10 GB part alone (about 2.5 minutes)
timed "gzip -1 of 2 GB (one member, one core)" sh -c "gzip -1 -c '$W/go2g.jsonl' > '$W/go2g.jsonl.gz'"
timed "gload compress --codec bgzf of 2 GB" $G compress --quiet --out "$W/go2g.bgzf.jsonl.gz" "$W/go2g.jsonl"
timed "gload compress (zstd frames) of 2 GB" $G compress --quiet --out "$W/go2g.framed.jsonl.zst" "$W/go2g.jsonl"
ls -l "$W"
tok "2 GB plain" "$W/go2g.jsonl" "$W/go2g.jsonl"
tok "2 GB one gzip member" "$W/go2g.jsonl" "$W/go2g.jsonl.gz"
tok "2 GB BGZF" "$W/go2g.jsonl" "$W/go2g.bgzf.jsonl.gz"
tok "2 GB framed zstd" "$W/go2g.jsonl" "$W/go2g.framed.jsonl.zst"
rm -f "$W/go2g.jsonl.gz" "$W/go2g.bgzf.jsonl.gz" "$W/go2g.framed.jsonl.zst"
fi
for i in $(seq $N10); do cat "$W/go2g.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go2g.jsonl"
timed "gload compress (zstd frames) of 10 GB" $G compress --quiet --out "$W/go10g.framed.jsonl.zst" "$W/go10g.jsonl"
timed "gload compress --codec bgzf of 10 GB" $G compress --quiet --out "$W/go10g.bgzf.jsonl.gz" "$W/go10g.jsonl"
ls -l "$W"
cat "$W/go10g.jsonl" > /dev/null
tok "10 GB plain" "$W/go10g.jsonl" "$W/go10g.jsonl"
tok "10 GB framed zstd" "$W/go10g.jsonl" "$W/go10g.framed.jsonl.zst"
tok "10 GB BGZF" "$W/go10g.jsonl" "$W/go10g.bgzf.jsonl.gz"
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/compressed.txt"
