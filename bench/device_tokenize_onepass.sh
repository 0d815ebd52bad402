#!/usr/bin/env bash
# Issue 18, sixth pass: the shared word cache measured where repetition cannot help it — one cold pass (--passes 1)
# over corpora read once: the 40 MB Go-source corpus and the multilingual text corpus, base (gload-base.gz) against
# candidate (gload.gz) alternately, at 1 and 16 workers (GOMAXPROCS = workers), two rounds. About 1 minute.
# Carry build/devrunS (bench/prepare_devrun_ab.sh) with multi.jsonl.gz added (cp build/devrun18/multi.jsonl.gz
# build/devrunS/, from bench/prepare_devrun18.sh), or build/devrun18 with gload-base.gz added. Writes onepass.jsonl.
set -uo pipefail
d=${DEVRUN:-build/devrun18}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for b in gload gload-base; do [[ -x $d/$b ]] || { gunzip -kf $d/$b.gz && chmod +x $d/$b; }; done
W=$(mktemp -d /tmp/gload-one.XXXXXX)
trap 'rm -rf "$W"' EXIT
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
gunzip -c $d/multi.jsonl.gz > "$W/multi.jsonl"
for round in 1 2; do
	for corpus in go multi; do
		for w in 1 16; do
			for b in gload gload-base; do
				GOMAXPROCS=$w $d/$b encode --bench --passes 1 --tokenizer $d/llama3.json.gz --workers $w < "$W/$corpus.jsonl" 2>/dev/null | tail -1 |
					python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r.update(binary=sys.argv[1], corpus=sys.argv[2], round=int(sys.argv[3])); print(json.dumps(r))' $b $corpus $round
			done
		done
	done
done | tee "$OUT/onepass.jsonl"
