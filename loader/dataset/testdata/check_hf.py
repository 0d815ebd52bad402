"""Check a gload dataset directory with the real Hugging Face / Arrow packages.

Usage: check_hf.py DATASET_DIR EXPECTED_JSON [DATASET_DIR EXPECTED_JSON ...]

EXPECTED_JSON is a file holding {"input_ids": [[...], ...], "columns": {"name": [...], ...}}
(or that JSON text itself). The script checks that

  * datasets.load_from_disk(DATASET_DIR) gives exactly those rows and columns,
    with features input_ids: List(Value("int32")) (datasets >= 4; Sequence(Value("int32")) before) and string
    columns, and the "gload" entry of dataset_info.json (pad token) when EXPECTED_JSON has "special";
  * pyarrow.ipc.open_stream(pyarrow.memory_map(f)) reads every shard listed in
    state.json, with the "huggingface" schema metadata, and the shards together
    hold the same rows.

For each pair it prints "ok", or prints what differs and exits 1.
"""

import json
import os
import sys

import datasets
import pyarrow as pa


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2 != 0:
        fail("usage: check_hf.py DATASET_DIR EXPECTED_JSON [DATASET_DIR EXPECTED_JSON ...]")
    for i in range(0, len(args), 2):
        check(args[i], args[i + 1])


def check(ddir, exp_arg):
    if os.path.exists(exp_arg):
        with open(exp_arg, encoding="utf-8") as f:
            expected = json.load(f)
    else:
        expected = json.loads(exp_arg)
    want_ids = expected["input_ids"]
    want_cols = expected.get("columns") or {}

    # 1. datasets.load_from_disk
    ds = datasets.load_from_disk(ddir)
    if ds.num_rows != len(want_ids):
        fail(f"{ddir}: load_from_disk: {ds.num_rows} rows, want {len(want_ids)}")
    want_names = ["input_ids"] + list(want_cols)
    if ds.column_names != want_names:
        fail(f"{ddir}: load_from_disk: columns {ds.column_names}, want {want_names}")
    feat = ds.features["input_ids"]
    list_types = tuple(t for t in (getattr(datasets, "List", None), datasets.Sequence) if isinstance(t, type))
    if not isinstance(feat, list_types) or feat.feature.dtype != "int32":
        fail(f"{ddir}: load_from_disk: input_ids feature {feat!r}")
    for name in want_cols:
        if ds.features[name] != datasets.Value("string"):
            fail(f"{ddir}: load_from_disk: feature {name}: {ds.features[name]!r}")
    got_ids = ds["input_ids"]
    if len(want_ids) > 0:
        got_ids = list(got_ids)
    if got_ids != want_ids:
        for i, (g, w) in enumerate(zip(got_ids, want_ids)):
            if g != w:
                fail(f"{ddir}: load_from_disk: row {i}: input_ids {g[:20]}..., want {w[:20]}...")
        fail(f"{ddir}: load_from_disk: input_ids differ")
    for name, want in want_cols.items():
        got = list(ds[name]) if len(want) > 0 else []
        if got != want:
            fail(f"{ddir}: load_from_disk: column {name} differs")

    # 2. pyarrow stream reader over a memory map, shard by shard
    with open(os.path.join(ddir, "state.json"), encoding="utf-8") as f:
        state = json.load(f)
    with open(os.path.join(ddir, "dataset_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    rows = []
    cols = {name: [] for name in want_cols}
    for entry in state["_data_files"]:
        path = os.path.join(ddir, entry["filename"])
        with pa.memory_map(path) as source:
            reader = pa.ipc.open_stream(source)
            schema = reader.schema
            table = reader.read_all()
        if schema.field("input_ids").type != pa.list_(pa.int32()):
            fail(f"{ddir}: {path}: input_ids type {schema.field('input_ids').type}")
        meta = json.loads(schema.metadata[b"huggingface"])
        if meta != {"info": {"features": info["features"]}}:
            fail(f"{ddir}: {path}: huggingface metadata {meta} does not match dataset_info.json")
        table.validate(full=True)
        rows.extend(table.column("input_ids").to_pylist())
        for name in want_cols:
            cols[name].extend(table.column(name).to_pylist())
    if rows != want_ids:
        fail(f"{ddir}: pyarrow: input_ids over the shards differ")
    if cols != {k: list(v) for k, v in want_cols.items()}:
        fail(f"{ddir}: pyarrow: columns over the shards differ")
    print("ok")


if __name__ == "__main__":
    main()
