#!/usr/bin/env bash
# The main job on the bundled example: tokenize the UDHR corpus into a dataset, show what it holds, open it with
# Hugging Face datasets, serve it with `gload serve`, and pull one epoch of batches from Python (shared memory).
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
# Server and client both default to the address in GLOAD_ADDR (without it: the user's private socket,
# $XDG_RUNTIME_DIR/gload.sock, mode 0600); a socket of its own keeps the demo clear of a server already running.
sock=$(mktemp -d)/gload.sock
export GLOAD_ADDR="unix://$sock"
bin/gload serve --dataset udhr="$out" --log-level warn &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
.venv/bin/python - <<'PY'
from gload import Loader
with Loader(None, "udhr", batch_size=8, pad_multiple=64, transport="shm", seed=0) as loader:
    print("shapes this epoch (rows, length):", loader.shapes())
    rows = 0
    for step, batch in enumerate(loader):
        rows += len(batch["index"])
        if step < 3:
            print(f"batch {step}: input_ids {tuple(batch['input_ids'].shape)}, rows {[int(i) for i in batch['index'][:4]]}...")
    print(f"one epoch: {step + 1} batches, {rows} rows; resume state {loader.state_dict()}")
    print("(this loop has no training step, so nearly all of its time is spent waiting for the next batch: the report's")
    print(" data-wait share below is that of a loop doing nothing else; in a training loop it is the step's idle share)")
    print(loader.report())
PY
