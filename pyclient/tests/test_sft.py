"""SFT datasets: `gload tokenize --format chat` on the llama3-instruct chat fixture, served to the Python client over
both transports, bucketed and packed. Every batch's labels are the reference labels of its rows (from
shared/fixtures/chat), -100 at padding and at each packed document's first token; input_ids match too."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, TRANSPORTS, Server, _short_tmp, PATIENCE

import gload

SHARED = Path(os.environ.get("GLOAD_SHARED", REPO.parent / "shared"))
CHAT = SHARED / "fixtures" / "chat"


def _gunzip(src: Path, dst: Path) -> None:
    with gzip.open(src, "rb") as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g)


@pytest.fixture(scope="module")
def sft(gload_bin, tmp_path_factory):
    if not CHAT.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"chat fixtures missing at {CHAT}")
        pytest.skip(f"chat fixtures missing at {CHAT} (set GLOAD_SHARED)")
    root = tmp_path_factory.mktemp("sft")
    tok = root / "tok"
    tok.mkdir()
    _gunzip(SHARED / "fixtures" / "tokenizers" / "llama3" / "tokenizer.json.gz", tok / "tokenizer.json")
    _gunzip(CHAT / "tokenizers" / "llama3-instruct" / "tokenizer_config.json.gz", tok / "tokenizer_config.json")
    out = root / "ds"
    subprocess.run([gload_bin, "tokenize", "--format", "chat", "--quiet", "--tokenizer", str(tok / "tokenizer.json"),
                    "--out", str(out), str(CHAT / "conversations.jsonl.gz")], check=True, stdout=subprocess.DEVNULL)
    refs = []
    with gzip.open(CHAT / "llama3-instruct.jsonl.gz", "rt", encoding="utf-8") as f:
        next(f)  # metadata
        refs = [json.loads(line) for line in f]
    d = _short_tmp("gload-sft-")
    s = Server(gload_bin, d / "s.sock", {"sft": out}, d / "serve.log").start()
    yield s, out, refs
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


def _expected(b, refs, packed):
    rows, length = b["input_ids"].shape
    ids = np.zeros((rows, length), np.int64)
    labels = np.full((rows, length), -100, np.int64)
    k = 0
    for r in range(rows):
        off = 0
        while off < b["lengths"][r]:
            ref = refs[int(b["index"][k])]
            n = len(ref["input_ids"]) if packed else int(b["lengths"][r])
            ids[r, off:off + n] = ref["input_ids"][:n]
            labels[r, off:off + n] = ref["labels"][:n]
            if packed:
                labels[r, off] = -100
            off += n
            k += 1
            if not packed:
                break
    return ids, labels


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_served_labels_are_the_references(sft, transport, policy):
    server, _, refs = sft
    kw = dict(batch_size=8) if policy == "bucketed" else dict(batch_size=2, seq_len=8192)
    loader = gload.Loader(server.addr, "sft", transport=transport, policy=policy, remainder="keep",
                          return_tensors="np", connect_timeout=PATIENCE, keys="all", **kw)
    seen = 0
    for b in loader:
        want_ids, want_labels = _expected(b, refs, policy == "packed")
        mask = b["attention_mask"].astype(bool)
        assert (b["input_ids"][mask] == want_ids[mask]).all()
        assert (b["labels"] == want_labels).all(), "labels differ from the chat fixture's references"
        assert (b["labels"][~mask] == -100).all()
        seen += len(b["index"])
    assert seen == len(refs)
    # The report shows the trained-token share of what was handed out.
    trained = sum(sum(1 for x in r["labels"] if x != -100) for r in refs)
    real = sum(len(r["input_ids"]) for r in refs)
    if policy == "packed":  # each document's first token is masked as well
        trained -= sum(1 for r in refs if r["labels"] and r["labels"][0] != -100)
    assert f"trained tokens {trained} of {real} " in loader.report(gpu=False)


def test_load_from_disk_shows_labels(sft):
    datasets = pytest.importorskip("datasets")
    _, out, refs = sft
    ds = datasets.load_from_disk(str(out))
    assert ds.column_names[:2] == ["input_ids", "labels"]
    assert ds[5]["labels"] == refs[5]["labels"]
    assert ds[5]["input_ids"] == refs[5]["input_ids"]


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_chat_from_parquet_and_hf_dirs(sft, gload_bin, tmp_path, fmt):
    """Conversations as nested list<struct<role, content>> columns (Parquet, and a save_to_disk dir) give the same
    input_ids and labels as the JSON Lines references."""
    pa = pytest.importorskip("pyarrow")
    _, _, refs = sft
    with gzip.open(CHAT / "conversations.jsonl.gz", "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    keep = [i for i, r in enumerate(recs) if "messages" in r]
    table = pa.table({"id": [recs[i]["id"] for i in keep], "messages": [recs[i]["messages"] for i in keep]})
    if fmt == "parquet":
        import pyarrow.parquet as pq

        src = tmp_path / "sft.parquet"
        pq.write_table(table, src, row_group_size=64)
    else:
        datasets = pytest.importorskip("datasets")
        src = tmp_path / "sft_hf"
        datasets.Dataset(table).save_to_disk(str(src), max_shard_size="100KB")
    tok = tmp_path / "tok"
    tok.mkdir()
    _gunzip(SHARED / "fixtures" / "tokenizers" / "llama3" / "tokenizer.json.gz", tok / "tokenizer.json")
    _gunzip(CHAT / "tokenizers" / "llama3-instruct" / "tokenizer_config.json.gz", tok / "tokenizer_config.json")
    out = tmp_path / "ds"
    subprocess.run([gload_bin, "tokenize", "--format", "chat", "--quiet", "--tokenizer", str(tok / "tokenizer.json"),
                    "--out", str(out), str(src)], check=True, stdout=subprocess.DEVNULL)
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_from_disk(str(out))
    assert ds.num_rows == len(keep)
    assert ds["input_ids"] == [refs[i]["input_ids"] for i in keep]
    assert ds["labels"] == [refs[i]["labels"] for i in keep]
