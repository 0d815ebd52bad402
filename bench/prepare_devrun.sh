#!/usr/bin/env bash
# Prepares build/devrun, the folder the device scripts (bench/device_*.sh) expect on the GPU machine: the gload binary
# (cgo on, for NVML; gzipped to fit the transfer limit), the llama3 fixture tokenizer, the reference corpus of
# ../shared/bench/make_corpus.py and train_ref.py. Run from anywhere; then carry build/devrun.
set -euo pipefail
cd "$(dirname "$0")/.."
d=build/devrun
mkdir -p "$d"
CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -ldflags="-s -w" -o build/gload-devrun ./cmd/gload
gzip -c build/gload-devrun > "$d/gload.gz"
# bench/device_mixture.sh: the planner benchmarks
CGO_CFLAGS=-Wno-deprecated-declarations go test -c -o build/bucket.test ./bucket
gzip -c build/bucket.test > "$d/bucket.test.gz"
rm -f "$d/gload"
cp ../shared/fixtures/tokenizers/llama3/tokenizer.json.gz "$d/llama3.json.gz"
cp ../shared/bench/train_ref.py "$d/"
if [[ ! -f $d/corpus.jsonl.gz ]]; then
	python3 ../shared/bench/make_corpus.py build/corpus.jsonl
	gzip -c build/corpus.jsonl > "$d/corpus.jsonl.gz"
fi
# bench/device_sft.sh: the chat fixture, and the datasets wheels the GPU image lacks (pure Python; numpy, pyarrow,
# pandas, fsspec, huggingface-hub, xxhash and tqdm are there).
cp ../shared/fixtures/chat/conversations.jsonl.gz "$d/"
gunzip -c ../shared/fixtures/chat/tokenizers/llama3-instruct/tokenizer_config.json.gz > "$d/llama3-instruct_tokenizer_config.json"
if ! compgen -G "$d/whl/datasets-*.whl" >/dev/null; then
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-d "$d/whl" datasets==4.0.0 dill==0.3.8 multiprocess==0.70.16
fi
# bench/device_integrations.sh: torchdata (pure Python; the GPU image lacks it).
if ! compgen -G "$d/whl/torchdata-*.whl" >/dev/null; then
	python3 -m pip download -q --no-deps --only-binary=:all: -d "$d/whl" torchdata==0.11.0
fi
# bench/device_handoff.sh: pytest (pure Python; for the CUDA tests where the image lacks it).
if ! compgen -G "$d/whl/pytest-*.whl" >/dev/null; then
	python3 -m pip download -q --only-binary=:all: --python-version 3.12 -d "$d/whl" pytest==8.3.5
fi
# bench/device_identity.sh: the merge and first-batch benchmarks as test binaries.
for p in tokenize/merge loader; do
	CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go test -c -ldflags="-s -w" -o "build/$(basename $p).test" "./$p"
	gzip -c "build/$(basename $p).test" > "$d/$(basename $p).test.gz"
done
# WHEELS=1: the Python client's test dependencies as wheels, for bench/device_pytests.sh on a machine without network.
if [[ ${WHEELS:-0} == 1 && ! -d $d/wheels ]]; then
	pip download -q -d "$d/wheels" --only-binary=:all: pytest grpcio protobuf numpy
fi
du -sh "$d"
