#!/usr/bin/env bash
# Prepares build/devrun18 for bench/device_tokenize_table.sh (issue 18's table on the GPU machine): the gload binary
# (gzipped), the llama3, llama2 and bert fixture tokenizers, the Go-source corpus (../shared/bench/make_corpus.py) and
# the multilingual part of ../shared/bench/make_text_corpus.py (its header says which Debian and npm packages it
# reads; TEXT_CORPUS=DIR reuses a built one). About 46 MB; carry build/devrun18.
set -euo pipefail
cd "$(dirname "$0")/.."
d=${DEVRUN_DIR:-build/devrun18} # NO_TEXT_CORPUS=1: without the multilingual corpus (bench/device_tokenize_hwlimit.sh)
mkdir -p "$d"
CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -tags arrow_json_stdlib -ldflags="-s -w" -o build/gload-devrun18 ./cmd/gload
gzip -c build/gload-devrun18 > "$d/gload.gz"
rm -f "$d/gload"
for t in llama3 llama2; do cp ../shared/fixtures/tokenizers/$t/tokenizer.json.gz "$d/$t.json.gz"; done
cp ../shared/fixtures/tokenizers/bert-base-uncased/tokenizer.json.gz "$d/bert.json.gz"
if [[ ! -f $d/corpus.jsonl.gz ]]; then
	[[ -f build/corpus.jsonl ]] || python3 ../shared/bench/make_corpus.py build/corpus.jsonl
	gzip -c build/corpus.jsonl > "$d/corpus.jsonl.gz"
fi
if [[ ! -f $d/multi.jsonl.gz && -z ${NO_TEXT_CORPUS:-} ]]; then
	tc=${TEXT_CORPUS:-build/textcorpus}
	[[ -f $tc/multi.jsonl ]] || python3 ../shared/bench/make_text_corpus.py "$tc"
	gzip -6 -c "$tc/multi.jsonl" > "$d/multi.jsonl.gz"
fi
du -sh "$d"
