"""The bundled example tokenizer (examples/udhr) loads with Hugging Face's own loaders in the oldest supported stack
(tokenizers 0.19 reads BPE merges only as "a b" strings; AutoTokenizer needs tokenizer_class), and encodes the test
corpus to the ids `gload tokenize` wrote (issue 37, item 6)."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import REPO

pa = pytest.importorskip("pyarrow")


def test_tokenizers_loads_it():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(REPO / "examples" / "udhr" / "tokenizer.json"))
    assert tok.get_vocab_size() == 4096


def test_auto_tokenizer_loads_it_and_agrees_with_gload(datasets):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(REPO / "examples" / "udhr"))
    assert tok.pad_token == "<|pad|>" and tok.eos_token == "<|eos|>"
    with gzip.open(datasets.small.parent / "small.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    stored = []
    for arrow in sorted(datasets.small.glob("*.arrow")):
        with pa.memory_map(str(arrow)) as src:
            stored += pa.ipc.open_stream(src).read_all().column("input_ids").to_pylist()
    assert len(stored) == len(texts) == 600
    for i, (text, ids) in enumerate(zip(texts, stored)):
        # gload tokenize writes the text's tokens only (no BOS from the post-processor unless asked).
        got = tok(text, add_special_tokens=False).input_ids
        assert got == ids, f"record {i}: transformers' ids differ from gload tokenize's"
