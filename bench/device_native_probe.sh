#!/usr/bin/env bash
# Issue 14 diagnosis on the GPU machine: bench/native_probe.py (a train_ref-shaped loop: GPU work, a host sync, then
# next()) for the clients of ORDER (default "base new": build/devrun/pyclient-base and this tree's) against one
# server, at two step sizes. Before carrying: bench/prepare_devrun.sh and BASE=<commit> bench/prepare_handoff_ab.sh.
set -uo pipefail
d=build/devrun
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
command -v cc >/dev/null && scripts/build-copier.sh
G=$d/gload
[[ -x $G ]] || { gunzip -kf $d/gload.gz && chmod +x $G; }
W=$(mktemp -d /tmp/gload-probe.XXXXXX)
SERVE=
cleanup() { [[ -n $SERVE ]] && kill "$SERVE" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
gunzip -c $d/llama3.json.gz > "$W/tokenizer.json"
gunzip -c $d/corpus.jsonl.gz > "$W/corpus.jsonl"
$G tokenize --quiet --tokenizer "$W/tokenizer.json" --add-special-tokens --max-length 1024 --workers "$(nproc)" \
	--out "$W/data" "$W/corpus.jsonl" > /dev/null 2>&1
export GLOAD_ADDR="unix://$W/gload.sock" GLOAD_DATASET=corpus
$G serve --dataset corpus="$W/data" --listen "$GLOAD_ADDR" --log-level warn 2> "$OUT/serve.log" &
SERVE=$!
for _ in $(seq 100); do [[ -S $W/gload.sock ]] && break; sleep 0.1; done
for v in ${ORDER:-base new}; do
	if [[ $v == new ]]; then pp=$PWD/pyclient; else pp=$PWD/$d/pyclient-$v; fi
	for work in ${WORK:-40 150}; do
		PROBE_CUR=${PROBE_CUR:-} PYTHONPATH=$pp timeout 120 python3 bench/native_probe.py --work "$work" --label "$v" | tee -a "$OUT/probe.jsonl"
	done
done
