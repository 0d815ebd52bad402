#!/usr/bin/env bash
# Prepares build/devrun, the one folder every GPU-machine suite (bench/device.sh SUITE) reads: the gload binary (cgo
# on, for NVML; gzipped to fit the transfer limit), the test binaries of the planner, merge and first-batch
# benchmarks, the llama3, llama2 and bert fixture tokenizers, the reference corpus of ../shared/bench/make_corpus.py,
# train_ref.py, the chat fixture, and pure-Python wheels the GPU image lacks (datasets, torchdata, pytest). Run from
# anywhere on the build machine (about 3-5 minutes cold), then carry build/devrun.
#
#   --text-corpus          add multi.jsonl.gz, the multilingual part of ../shared/bench/make_text_corpus.py
#                          (tokenize table; its header says which Debian and npm packages it reads;
#                          TEXT_CORPUS=DIR reuses a built one)
#   --base COMMIT          add gload-base.gz, the binary of COMMIT (tokenize ab: two binaries alternately)
#   --pyclient-base COMMIT[:NAME]  put COMMIT's Python client in build/devrun/pyclient-NAME (default NAME base), for
#                          handoff/native with ORDER="base new new base"; repeat it for more clients
#   --wheels               add the Python client's test dependencies as wheels (pytests, on a machine without network)
#   --tokenize-only        only what the tokenize suites read (binary, tokenizers, corpus), to stay under the
#                          carry limit with --text-corpus and --base
#   --plan-compare         add whl-bench, the wheels of bench/plan_compare.py's references for Python 3.12 (Mosaic
#                          streaming, Megatron-core and what streaming imports that the GPU image lacks; 8 MB)
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
d=${DEVRUN_DIR:-build/devrun}
text=0 wheels=0 only_tok=0 plan_compare=0 base=
pyclients=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--text-corpus) text=1 ;;
	--wheels) wheels=1 ;;
	--tokenize-only) only_tok=1 ;;
	--base) base=$2; shift ;;
	--pyclient-base) pyclients+=("$2"); shift ;;
	--plan-compare) plan_compare=1 ;;
	-h | --help) sed -n 2,18p "$self"; exit 0 ;;
	*) echo "prepare_devrun.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$d"
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
build() { go build -tags arrow_json_stdlib -ldflags="-s -w" -o "$1" ./cmd/gload; }
build build/gload-devrun
gzip -c build/gload-devrun > "$d/gload.gz"
rm -f "$d/gload"
for t in llama3 llama2; do cp ../shared/fixtures/tokenizers/$t/tokenizer.json.gz "$d/$t.json.gz"; done
cp ../shared/fixtures/tokenizers/bert-base-uncased/tokenizer.json.gz "$d/bert.json.gz"
if [[ ! -f $d/corpus.jsonl.gz ]]; then
	[[ -f build/corpus.jsonl ]] || python3 ../shared/bench/make_corpus.py build/corpus.jsonl
	gzip -c build/corpus.jsonl > "$d/corpus.jsonl.gz"
fi
if [[ $text == 1 && ! -f $d/multi.jsonl.gz ]]; then
	tc=${TEXT_CORPUS:-build/textcorpus}
	[[ -f $tc/multi.jsonl ]] || python3 ../shared/bench/make_text_corpus.py "$tc"
	gzip -6 -c "$tc/multi.jsonl" > "$d/multi.jsonl.gz"
fi
if [[ -n $base ]]; then
	wt=$(mktemp -d /tmp/gload-base.XXXXXX)
	git worktree add -q --detach "$wt" "$base"
	(cd "$wt" && build "$OLDPWD/build/gload-devrun-base")
	git worktree remove --force "$wt"
	gzip -c build/gload-devrun-base > "$d/gload-base.gz"
	rm -f "$d/gload-base"
	echo "base $(git rev-parse --short "$base"), candidate $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
fi
for spec in "${pyclients[@]}"; do
	c=${spec%%:*} name=base
	[[ $spec == *:* ]] && name=${spec#*:}
	rm -rf "$d/pyclient-$name"
	mkdir -p "$d/pyclient-$name"
	git archive "$c" pyclient/gload | tar -x -C "$d/pyclient-$name" --strip-components=1
	echo "pyclient-$name: $(git rev-parse --short "$c")"
done
if [[ $only_tok == 0 ]]; then
	cp ../shared/bench/train_ref.py "$d/"
	# mixture: the planner benchmarks; identity: the merge and first-batch benchmarks.
	go test -c -tags arrow_json_stdlib -ldflags="-s -w" -o build/bucket.test ./bucket
	gzip -c build/bucket.test > "$d/bucket.test.gz"
	for p in tokenize/merge loader; do
		go test -c -tags arrow_json_stdlib -ldflags="-s -w" -o "build/$(basename $p).test" "./$p"
		gzip -c "build/$(basename $p).test" > "$d/$(basename $p).test.gz"
	done
	# sft: the chat fixture, and the datasets wheels the GPU image lacks (pure Python; numpy, pyarrow, pandas, fsspec,
	# huggingface-hub, xxhash and tqdm are there).
	cp ../shared/fixtures/chat/conversations.jsonl.gz "$d/"
	gunzip -c ../shared/fixtures/chat/tokenizers/llama3-instruct/tokenizer_config.json.gz > "$d/llama3-instruct_tokenizer_config.json"
	if ! compgen -G "$d/whl/datasets-*.whl" >/dev/null; then
		python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
			--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
			-d "$d/whl" datasets==4.7.0 dill==0.3.8 multiprocess==0.70.16
	fi
	# integrations: torchdata and TRL (pure Python; the GPU image lacks them). TRL 1.16 needs datasets >= 4.7.
	if ! compgen -G "$d/whl/torchdata-*.whl" >/dev/null; then
		python3 -m pip download -q --no-deps --only-binary=:all: -d "$d/whl" torchdata==0.11.0
	fi
	if ! compgen -G "$d/whl/trl-*.whl" >/dev/null; then
		python3 -m pip download -q --no-deps --only-binary=:all: -d "$d/whl" trl==1.16.0
	fi
	# handoff/native: pytest (pure Python; for the CUDA tests where the image lacks it).
	if ! compgen -G "$d/whl/pytest-*.whl" >/dev/null; then
		python3 -m pip download -q --only-binary=:all: --python-version 3.12 -d "$d/whl" pytest==8.3.5
	fi
fi
# plan_compare: the references' wheels, installed --no-deps over the image's torch, numpy and transformers (the
# newest Megatron-core for Python 3.12; zstd 1.5.6.2 and 1.5.7.3, the other zstd wheels for 3.12, are yanked).
if [[ $plan_compare == 1 ]] && ! compgen -G "$d/whl-bench/megatron_core-*.whl" >/dev/null; then
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d "$d/whl-bench" mosaicml-streaming==0.13.0 megatron-core==0.19.2 \
		catalogue==2.0.10 brotli==1.2.1 python-snappy==0.7.3 cramjam==2.14.0 zstd==1.5.6.1
fi
if [[ $wheels == 1 && ! -d $d/wheels ]]; then
	python3 -m pip download -q -d "$d/wheels" --only-binary=:all: pytest grpcio protobuf numpy
fi
du -sh "$d"
