"""examples/cluster/ray_tokenize.py on a local Ray cluster: 4 tasks, merged, equal to a single run row for row."""

import importlib.util
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "examples" / "udhr" / "tokenizer.json"


def _rows(dataset_dir):
    import pyarrow as pa

    state = json.loads((dataset_dir / "state.json").read_text())
    rows = []
    for f in state["_data_files"]:
        with pa.OSFile(str(dataset_dir / f["filename"])) as fh:
            table = pa.ipc.open_stream(fh).read_all()
        rows.extend(table.column("input_ids").to_pylist())
    return rows


def test_ray_tasks_merge_equal_single_run(tmp_path, gload_bin):
    try:
        import ray
    except ImportError:
        # CI installs ray into the newest stack (.ci/requirements.txt) and requires this group there (Makefile).
        pytest.skip("ray is not installed in this stack (pip install ray); CI has it in the newest stack only")
    spec = importlib.util.spec_from_file_location("ray_tokenize", ROOT / "examples" / "cluster" / "ray_tokenize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    words = ["human", "rights", "dignity", "freedom", "justice", "peace", "équité", "自由"]
    doc = 0
    for f, n in enumerate([120, 7, 0, 300, 45, 80]):
        with open(corpus / ("c-%02d.jsonl" % f), "w") as fh:
            for _ in range(n):
                text = " ".join(words[(doc + j * 3) % len(words)] for j in range(1 + doc % 90))
                fh.write(json.dumps({"text": text}) + "\n")
                doc += 1
    single = tmp_path / "single"
    subprocess.run([gload_bin, "tokenize", "--quiet", "--tokenizer", str(TOKENIZER), "--out", str(single),
                    "--shard-size", "20000", str(corpus)], check=True)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        merged = mod.run(str(TOKENIZER), str(tmp_path / "out"), 4, [str(corpus)], gload=gload_bin,
                         extra=["--shard-size", "20000"])
    finally:
        ray.shutdown()
    assert _rows(pathlib.Path(merged)) == _rows(single)
    assert len(_rows(single)) == doc
