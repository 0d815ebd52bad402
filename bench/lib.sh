# Shared preamble of the GPU-machine suites (bench/suites/*.sh, started by bench/device.sh from the repository root);
# sourced, not run. It sets:
#   d    the prepared folder (DEVRUN, default build/devrun, made by bench/prepare_devrun.sh and carried)
#   OUT  where results go (default /tmp/out; what the device call brings back)
#   G    the gload binary, unpacked from $d/gload.gz
#   W    a scratch folder, removed at exit together with a server started by serve_corpus and the paths in CLEAN
# and defines unpack, prepare_corpus, tokenize_corpus, serve_corpus and pytest_python.
d=${DEVRUN:-build/devrun}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [[ ! -f $d/gload.gz && ! -x $d/gload ]]; then
	echo "bench: no $d/gload.gz: run bench/prepare_devrun.sh on the build machine and carry $d" >&2
	exit 2
fi
# unpack NAME...: $d/NAME from $d/NAME.gz (binaries travel gzipped to fit the transfer limit).
unpack() {
	local b
	for b; do [[ -x $d/$b ]] || { gunzip -kf "$d/$b.gz" && chmod +x "$d/$b"; }; done
}
unpack gload
G=$d/gload
W=$(mktemp -d /tmp/gload-bench.XXXXXX)
SERVE=
CLEAN=()
_bench_cleanup() {
	if [[ -n $SERVE ]]; then kill "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; fi
	rm -rf "$W" "${CLEAN[@]}"
}
trap _bench_cleanup EXIT
# prepare_corpus: the llama3 tokenizer and the reference corpus (../shared/bench/make_corpus.py) in $W.
prepare_corpus() {
	gunzip -c "$d/llama3.json.gz" > "$W/tokenizer.json"
	gunzip -c "$d/corpus.jsonl.gz" > "$W/corpus.jsonl"
}
# tokenize_corpus: prepare_corpus, then tokenize it as train_ref.py does (special tokens, rows cut at 1024) into $W/data.
tokenize_corpus() {
	prepare_corpus
	$G tokenize --quiet --tokenizer "$W/tokenizer.json" --add-special-tokens --max-length 1024 --workers "$(nproc)" \
		--out "$W/data" "$W/corpus.jsonl"
}
# serve_corpus [serve flags...]: gload serve of $W/data as "corpus" on $W/gload.sock (ADDR), log in $OUT/serve.log;
# returns once the socket exists.
serve_corpus() {
	ADDR="unix://$W/gload.sock"
	$G serve --dataset corpus="$W/data" --listen "$ADDR" --log-level warn "$@" 2> "$OUT/serve.log" &
	SERVE=$!
	for _ in $(seq 100); do [[ -S $W/gload.sock ]] && break; sleep 0.1; done
}
# pytest_python: prints a Python that has pytest: python3, or a venv over it with pytest from $d/whl.
pytest_python() {
	if python3 -c 'import pytest' 2>/dev/null; then
		echo python3
		return
	fi
	python3 -m venv --system-site-packages "$W/venv" >&2 &&
		"$W/venv/bin/pip" install -q --no-index --find-links "$d/whl" pytest >&2 2>&1 | tail -2 >&2
	echo "$W/venv/bin/python"
}
