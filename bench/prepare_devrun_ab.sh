#!/usr/bin/env bash
# Prepares build/devrunS for bench/device_tokenize_ab.sh: the candidate (this working tree) as gload.gz, the base
# (BASE=commit, default HEAD~1) as gload-base.gz, the llama3, llama2 and bert fixture tokenizers and the Go-source corpus
# (../shared/bench/make_corpus.py). About 30 MB; carry build/devrunS.
set -euo pipefail
cd "$(dirname "$0")/.."
d=${DEVRUN_DIR:-build/devrunS}
base=${BASE:-HEAD~1}
mkdir -p "$d"
build() { CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -tags arrow_json_stdlib -ldflags="-s -w" -o "$1" ./cmd/gload; }
build build/gload-ab-new
gzip -c build/gload-ab-new > "$d/gload.gz"
wt=$(mktemp -d /tmp/gload-base.XXXXXX)
git worktree add -q --detach "$wt" "$base"
(cd "$wt" && build "$OLDPWD/build/gload-ab-base")
git worktree remove --force "$wt"
gzip -c build/gload-ab-base > "$d/gload-base.gz"
rm -f "$d/gload" "$d/gload-base"
for t in llama3 llama2; do cp ../shared/fixtures/tokenizers/$t/tokenizer.json.gz "$d/$t.json.gz"; done
cp ../shared/fixtures/tokenizers/bert-base-uncased/tokenizer.json.gz "$d/bert.json.gz"
if [[ ! -f $d/corpus.jsonl.gz ]]; then
	[[ -f build/corpus.jsonl ]] || python3 ../shared/bench/make_corpus.py build/corpus.jsonl
	gzip -c build/corpus.jsonl > "$d/corpus.jsonl.gz"
fi
echo "base $(git rev-parse --short "$base"), candidate $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
du -sh "$d"
