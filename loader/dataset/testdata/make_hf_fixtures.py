"""Regenerate the foreign-writer fixtures under testdata/hf/ (committed; tiny).

Usage: python make_hf_fixtures.py [OUT_DIR]    (default: testdata/hf next to this script)

Each fixture directory holds a dataset plus expected.json:
  {"input_ids": [[...] or null, ...], "columns": {"name": [str or null, ...]}, "error_rows": [i, ...]}
error_rows lists rows whose ids do not fit in int32 (AppendTokens must fail there).

  hf_int64_3shards   datasets.save_to_disk: input_ids List(int64), 3 shards, batches of 7
                     rows, extra columns of other types (attention_mask list<int8>, score float, text)
  hf_uint16_large    datasets.save_to_disk: LargeList(uint16), 2 shards, batches of 5
  hf_fixed_int32     datasets.save_to_disk: List(int32, length=4) (fixed_size_list), 1 shard
  pa_mixed           pyarrow stream written directly: input_ids not first, a null input_ids
                     row, sliced arrays (offsets not starting at 0), empty batch, batch
                     sizes 3/0/5/2, struct, dictionary and string_view columns, null strings,
                     dataset_info.json in the old "Sequence" style
  pa_uint32_big      pyarrow: list<uint32> with one id >= 2**31 (error row), large_string column
"""

import json
import os
import shutil
import sys

import datasets
import pyarrow as pa

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf")


def fresh(name):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def expected(path, ids, columns, error_rows=()):
    with open(os.path.join(path, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"input_ids": ids, "columns": columns, "error_rows": list(error_rows)}, f)


def save_hf(ds, path, num_shards, batch):
    old = datasets.config.DEFAULT_MAX_BATCH_SIZE
    datasets.config.DEFAULT_MAX_BATCH_SIZE = batch
    try:
        ds.save_to_disk(path, num_shards=num_shards)
    finally:
        datasets.config.DEFAULT_MAX_BATCH_SIZE = old


def hf_int64_3shards():
    path = fresh("hf_int64_3shards")
    n = 40
    ids = [[(i * 7919 + j * 104729) % 150000 for j in range(i % 9)] for i in range(n)]
    text = [f"row {i} ü" for i in range(n)]
    ds = datasets.Dataset.from_dict(
        {
            "input_ids": ids,
            "attention_mask": [[1] * len(x) for x in ids],
            "score": [i / 3 for i in range(n)],
            "text": text,
        },
        features=datasets.Features(
            {
                "input_ids": datasets.List(datasets.Value("int64")),
                "attention_mask": datasets.List(datasets.Value("int8")),
                "score": datasets.Value("float32"),
                "text": datasets.Value("string"),
            }
        ),
    )
    save_hf(ds, path, 3, 7)
    expected(path, ids, {"text": text})


def hf_uint16_large():
    path = fresh("hf_uint16_large")
    n = 23
    ids = [[(i * 31 + j) % 65536 for j in range((i * 5) % 11)] for i in range(n)]
    ids[3] = [65535, 0, 1]
    ds = datasets.Dataset.from_dict(
        {"input_ids": ids},
        features=datasets.Features({"input_ids": datasets.LargeList(datasets.Value("uint16"))}),
    )
    save_hf(ds, path, 2, 5)
    expected(path, ids, {})


def hf_fixed_int32():
    path = fresh("hf_fixed_int32")
    n = 9
    ids = [[i, -i, 2**31 - 1, -(2**31)] for i in range(n)]
    ds = datasets.Dataset.from_dict(
        {"input_ids": ids},
        features=datasets.Features({"input_ids": datasets.List(datasets.Value("int32"), length=4)}),
    )
    save_hf(ds, path, 1, 4)
    expected(path, ids, {})


def write_stream(path, fname, schema, batches):
    with pa.OSFile(os.path.join(path, fname), "wb") as sink:
        with pa.ipc.new_stream(sink, schema) as w:
            for b in batches:
                w.write_batch(b)


def state(path, files, info):
    with open(os.path.join(path, "state.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "_data_files": [{"filename": x} for x in files],
                "_fingerprint": "0123456789abcdef",
                "_format_columns": None,
                "_format_kwargs": {},
                "_format_type": None,
                "_output_all_columns": False,
                "_split": None,
            },
            f,
            indent=2,
        )
    with open(os.path.join(path, "dataset_info.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)


def pa_mixed():
    path = fresh("pa_mixed")
    os.makedirs(path)
    n = 10
    ids = [[i * 100 + j for j in range(i % 4)] for i in range(n)]
    ids[4] = None
    text = [None if i % 3 == 0 else f"t{i}" for i in range(n)]
    full = pa.table(
        {
            "meta": pa.array([{"a": i, "b": f"m{i}"} for i in range(n)]),
            "tags": pa.array([f"tag{i % 2}" for i in range(n)]).dictionary_encode(),
            "view": pa.array([f"v{i}" for i in range(n)], type=pa.string_view()),
            "input_ids": pa.array(ids, type=pa.list_(pa.int32())),
            "text": pa.array(text, type=pa.string()),
        }
    )
    # Batches are slices of one table: offsets do not start at 0 and value
    # buffers hold rows of other batches.
    parts = [(0, 3), (3, 0), (3, 5), (8, 2)]
    batches = [full.slice(o, k).to_batches()[0] if k else pa.RecordBatch.from_pylist([], schema=full.schema) for o, k in parts]
    write_stream(path, "data-00000-of-00001.arrow", full.schema, batches)
    state(
        path,
        ["data-00000-of-00001.arrow"],
        {"features": {"input_ids": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "Sequence"}}},
    )
    expected(path, ids, {"text": text})


def pa_uint32_big():
    path = fresh("pa_uint32_big")
    os.makedirs(path)
    ids = [[1, 2], [2**31 - 1], [2**31, 5], []]
    src = ["a", "bb", None, ""]
    t = pa.table(
        {
            "input_ids": pa.array(ids, type=pa.list_(pa.uint32())),
            "src": pa.array(src, type=pa.large_string()),
        }
    )
    write_stream(path, "part-a.arrow", t.schema, t.slice(0, 2).to_batches())
    write_stream(path, "part-b.arrow", t.schema, t.slice(2).to_batches())
    state(path, ["part-a.arrow", "part-b.arrow"], {})
    expected(path, ids, {"src": src}, error_rows=[2])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    hf_int64_3shards()
    hf_uint16_large()
    hf_fixed_int32()
    pa_mixed()
    pa_uint32_big()
    print("fixtures written to", OUT)
