#!/usr/bin/env bash
# The first round's tokenizer benchmarks on the GPU machine, 16 cores, HF tokenizers 0.23.2 and pyarrow there
# (`bench/device_tokenize.sh round1`).
# Expects build/devrun (made by bench/prepare_devrun.sh) carried from the build machine; writes to $OUT.
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
	--threads ${THREADS:-1,2,4,8,16} --passes ${PASSES:-2} --json "$OUT/tokenizer.jsonl" 2>&1 | tee "$OUT/tokenizer.txt"
# End to end: JSONL -> Arrow dataset on disk, 16 cores, on the corpus three times over (120 MB) so that process start
# and tokenizer loading (about 0.3 s for either tool) do not dominate.
cat $d/corpus.jsonl $d/corpus.jsonl $d/corpus.jsonl > $d/corpus3.jsonl
python3 bench/tokenize_e2e.py --gload $d/gload --tokenizer $d/llama3.json.gz --corpus $d/corpus3.jsonl \
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
# Memory stays bounded while streaming: tokenize a 2 GB corpus (the corpus 50 times over) and report peak RSS.
for i in $(seq 50); do cat $d/corpus.jsonl; done > /tmp/corpus50.jsonl
python3 - "$d/gload" "$d/llama3.json.gz" <<'PY' 2>&1 | tee "$OUT/rss.txt"
import os, resource, subprocess, sys, time
t = time.time()
subprocess.run([sys.argv[1], "tokenize", "--quiet", "--tokenizer", sys.argv[2], "--out", "/tmp/ds50",
                "/tmp/corpus50.jsonl"], check=True, stdout=subprocess.DEVNULL)
secs = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
size = os.path.getsize("/tmp/corpus50.jsonl") / 1e9
print(f"gload tokenize of {size:.2f} GB: {secs:.1f} s ({size * 1e3 / secs:.0f} MB/s of JSONL), peak RSS {rss:.0f} MiB")
PY
rm -rf /tmp/ds50 /tmp/corpus50.jsonl
# Scaling with cores (issue 18): engine 1 vs 16 workers, end to end with the summary's stage line, disk vs tmpfs,
# one .gz input. Same files as above under build/devrun.
DEVRUN=$d bash bench/device_tokenize_scaling.sh
