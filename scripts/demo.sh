#!/usr/bin/env bash
# The main job on the bundled example: tokenize the UDHR corpus with the example tokenizer into a dataset, show
# what it holds, and open it from Python with Hugging Face datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/udhr
bin/gload tokenize --tokenizer examples/udhr/tokenizer.json --append-eos --keep-columns src \
	--out "$out" --overwrite examples/udhr/corpus.jsonl.gz
bin/gload inspect "$out" --decode 0 --tokenizer examples/udhr/tokenizer.json | cut -c1-160
.venv/bin/python - "$out" <<'PY'
import sys
import datasets
ds = datasets.load_from_disk(sys.argv[1])
print(f"datasets.load_from_disk: {ds.num_rows} rows, features {ds.features}")
print(f"row 0: src={ds[0]['src']!r}, first ids {ds[0]['input_ids'][:12]}")
PY
