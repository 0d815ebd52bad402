#!/usr/bin/env bash
# gload against Hugging Face tokenizers on the GPU machine (HF tokenizers and pyarrow installed there), llama3 on the
# Go-source corpus: the engine alone at THREADS (default 1,4,16) side by side with HF's encode/encode_batch, with a
# parity check over the whole corpus (bench/tokenizer.py), then end to end JSONL -> Arrow dataset on disk at 16
# workers on the corpus three times over (120 MB) against HF encode_batch + pyarrow IPC writing
# (bench/tokenize_e2e.py). bench/device.sh tokenize hf-e2e (about 3 minutes). Writes tokenizer.* and e2e.* to $OUT.
set -euo pipefail
. bench/lib.sh
python3 -c 'import tokenizers, pyarrow; print("tokenizers", tokenizers.__version__, "pyarrow", pyarrow.__version__)' | tee "$OUT/versions.txt"
gunzip -c "$d/corpus.jsonl.gz" > "$W/corpus.jsonl"
python3 bench/tokenizer.py --gload "$G" --tokenizer "$d/llama3.json.gz" --corpus "$W/corpus.jsonl" \
	--threads "${THREADS:-1,4,16}" --passes "${PASSES:-2}" --json "$OUT/tokenizer.jsonl" 2>&1 | tee "$OUT/tokenizer.txt"
cat "$W/corpus.jsonl" "$W/corpus.jsonl" "$W/corpus.jsonl" > "$W/corpus3.jsonl"
python3 bench/tokenize_e2e.py --gload "$G" --tokenizer "$d/llama3.json.gz" --corpus "$W/corpus3.jsonl" \
	--workers 16 --json "$OUT/e2e.jsonl" 2>&1 | tee "$OUT/e2e.txt"
