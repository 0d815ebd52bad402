#!/usr/bin/env bash
# Runs the tokenizer benchmarks on the GPU machine (16 cores, HF tokenizers 0.23.2, pyarrow there).
# Expects build/devrun/{gload.gz,corpus.jsonl.gz,llama3.json.gz} carried from the build machine; writes to $OUT.
set -euo pipefail
d=build/devrun
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
gunzip -kf $d/corpus.jsonl.gz
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
nproc | tee "$OUT/nproc.txt"
python3 -c 'import tokenizers, pyarrow; print("tokenizers", tokenizers.__version__, "pyarrow", pyarrow.__version__)'
# Engine alone, one thread and all, side by side with HF (and a parity check over the whole corpus).
python3 bench/tokenizer.py --gload $d/gload --tokenizer $d/llama3.json.gz --corpus $d/corpus.jsonl \
	--threads 1,2,4,8,16 --repeat 1 --json "$OUT/tokenizer.jsonl" 2>&1 | tee "$OUT/tokenizer.txt"
# End to end: JSONL -> Arrow dataset on disk, 16 cores.
python3 bench/tokenize_e2e.py --gload $d/gload --tokenizer $d/llama3.json.gz --corpus $d/corpus.jsonl \
	--workers 16 --json "$OUT/e2e.jsonl" 2>&1 | tee "$OUT/e2e.txt"
# pyarrow on the GPU machine reads gload's shards zero-copy.
$d/gload tokenize --quiet --tokenizer $d/llama3.json.gz --shard-size 8MB --out /tmp/ds $d/corpus.jsonl
python3 - <<'PY' 2>&1 | tee "$OUT/pyarrow.txt"
import glob, pyarrow as pa
rows = 0
for f in sorted(glob.glob("/tmp/ds/data-*.arrow")):
    t = pa.ipc.open_stream(pa.memory_map(f)).read_all()
    assert t.schema.field("input_ids").type == pa.list_(pa.int32()), t.schema
    rows += t.num_rows
print(f"pyarrow {pa.__version__}: read {rows} rows from", len(glob.glob('/tmp/ds/data-*.arrow')), "shards")
PY
