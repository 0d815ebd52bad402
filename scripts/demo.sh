#!/usr/bin/env bash
# The main job on the bundled example, and a check that it worked (CI runs it: a broken demo is a red build):
#   1. tokenize the UDHR corpus into a dataset and show what it holds (gload inspect);
#   2. open it with Hugging Face datasets (the directory is a plain save_to_disk dataset);
#   3. serve it with `gload serve` and pull one epoch of batches from Python over shared memory;
#   4. check: the epoch delivered every row of the dataset exactly once, and a Loader resumed from the state saved
#      half-way through the epoch delivers exactly the rows that were not seen yet.
# Every check that fails stops the demo with a non-zero exit and says what differed.
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
# Server and client both default to the address in GLOAD_ADDR (without it: the user's private socket); a private
# directory of its own keeps the demo clear of a server already running, and goes when the demo ends.
tmp=$(mktemp -d)
export GLOAD_ADDR="unix://$tmp/gload.sock"
bin/gload serve --dataset udhr="$out" --log-level warn &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
.venv/bin/python - "$out" <<'PY'
import sys, time
import pyarrow as pa, pyarrow.ipc, glob, os
from gload import Loader, errors

# Wait for the server to answer (readiness, not a clock: the server may take its time on a busy machine).
deadline = time.monotonic() + 120
while True:
    try:
        with Loader(None, "udhr", batch_size=8) as probe:
            probe.shapes()
        break
    except errors.ServerUnavailable:
        if time.monotonic() > deadline:
            sys.exit("demo: gload serve did not answer within 120 s")
        time.sleep(0.1)

rows_in_dataset = sum(pa.ipc.open_stream(f).read_all().num_rows
                      for f in sorted(glob.glob(os.path.join(sys.argv[1], "data-*.arrow"))))
opts = dict(batch_size=8, pad_multiple=64, transport="shm", seed=0, remainder="keep",
            keys=["input_ids", "attention_mask", "labels", "index"])
with Loader(None, "udhr", **opts) as loader:
    print("shapes this epoch (rows, length):", loader.shapes())
    seen, half_state, after_half = [], None, []
    n = len(loader)
    for step, batch in enumerate(loader):
        ids = [int(i) for i in batch["index"]]
        seen += ids
        if half_state is not None:
            after_half += ids
        if step < 3:
            print(f"batch {step}: input_ids {tuple(batch['input_ids'].shape)}, rows {ids[:4]}...")
        if step + 1 == n // 2:
            half_state = loader.state_dict()
    print(f"one epoch: {step + 1} batches, {len(seen)} rows; state after {n // 2} batches: {half_state}")
    print("(this loop has no training step, so nearly all of its time is spent waiting for the next batch: the report's")
    print(" data-wait share below is that of a loop doing nothing else; in a training loop it is the step's idle share)")
    print(loader.report())

if sorted(seen) != list(range(rows_in_dataset)):
    sys.exit(f"demo: FAILED: the epoch delivered {len(seen)} rows ({len(set(seen))} distinct); "
             f"the dataset holds {rows_in_dataset}")
with Loader(None, "udhr", **opts) as resumed:
    resumed.load_state_dict(half_state)
    rest = [int(i) for batch in resumed for i in batch["index"]]
if rest != after_half:
    sys.exit(f"demo: FAILED: resumed from the half-way state, the Loader delivered {len(rest)} rows; "
             f"the uninterrupted epoch had {len(after_half)} after that point")
print(f"demo: ok: every one of the {rows_in_dataset} rows once per epoch; "
      f"resuming from the saved state gave the same {len(rest)} rows in the same order")
PY
