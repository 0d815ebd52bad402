"""examples/hf_trainer_sft.py (issues 12 and 15): SFT with gload.hf.GloadTrainer on a dataset written by
`gload tokenize --format chat` (64 conversations of the shared chat fixture, the example tokenizer's 4096-token
vocabulary with a chat template written here), real transformers + accelerate on CPU, a tiny GPT-2 from a config.

It proves the loss mask reaches the model: every batch the Trainer computes the loss on carries labels that equal
the dataset's stored labels (read from its Arrow file with pyarrow, not through gload) at every real token — -100
exactly where the stored labels are -100 — and -100 at every padding position; the loss is finite; the example
resumes from its checkpoint with the batches an uninterrupted run trains on next, labels included."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)
try:
    import transformers  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("transformers not importable (pip install transformers accelerate)", allow_module_level=True)
pa = pytest.importorskip("pyarrow")

import gload.hf  # noqa: E402
from conftest import PYCLIENT, REPO, TOKENIZER, Server, _short_tmp  # noqa: E402
from test_sft import CHAT  # noqa: E402

# A template whose assistant turns are prefix-stable: "<|assistant|>\n" + content + eos is the trained segment.
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def _example():
    spec = importlib.util.spec_from_file_location("hf_trainer_sft", PYCLIENT / "examples" / "hf_trainer_sft.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sft_server(gload_bin, tmp_path_factory):
    if not CHAT.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"chat fixtures missing at {CHAT}")
        pytest.skip(f"chat fixtures missing at {CHAT} (set GLOAD_SHARED)")
    root = tmp_path_factory.mktemp("sft-example")
    shutil.copy(TOKENIZER, root / "tokenizer.json")
    cfg = json.loads((REPO / "examples" / "udhr" / "tokenizer_config.json").read_text())
    cfg["chat_template"] = TEMPLATE
    (root / "tokenizer_config.json").write_text(json.dumps(cfg))
    with gzip.open(CHAT / "conversations.jsonl.gz", "rt", encoding="utf-8") as f:
        convs = [r for r in map(json.loads, f) if "messages" in r][:64]
    with open(root / "sft.jsonl", "w", encoding="utf-8") as g:
        for r in convs:
            g.write(json.dumps({"messages": r["messages"]}) + "\n")
    out = root / "ds"
    subprocess.run([gload_bin, "tokenize", "--format", "chat", "--quiet", "--tokenizer", str(root / "tokenizer.json"),
                    "--max-length", "512", "--out", str(out), str(root / "sft.jsonl")], check=True,
                   stdout=subprocess.DEVNULL)
    # The stored rows, read from the Arrow file itself (Hugging Face's streaming IPC format), not through gload.
    stored = {}
    for arrow in sorted(out.glob("*.arrow")):
        with pa.memory_map(str(arrow)) as src:
            t = pa.ipc.open_stream(src).read_all()
        for ids, labels in zip(t.column("input_ids").to_pylist(), t.column("labels").to_pylist()):
            assert tuple(ids) not in stored, "two conversations tokenize alike: the test could not tell them apart"
            stored[tuple(ids)] = labels
    assert len(stored) == 64
    trained = sum(sum(1 for x in v if x != -100) for v in stored.values())
    assert 0 < trained < sum(len(v) for v in stored.values()), "the fixture must have masked and trained tokens"
    d = _short_tmp("gload-sftx-")
    s = Server(gload_bin, d / "s.sock", {"sft": out}, d / "serve.log").start()
    yield s, stored
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


def _recording(seen):
    class Recording(gload.hf.GloadTrainer):
        def compute_loss(self, model, inputs, *a, **k):
            seen.append({k2: v.detach().cpu().clone() for k2, v in inputs.items()})
            return super().compute_loss(model, inputs, *a, **k)

    return Recording


def _check_mask(batch, stored):
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["labels"].dtype == torch.int64
    for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"]):
        n = int(mask.sum())
        assert bool(mask[:n].all()), "padding is at the end"
        want = stored.get(tuple(ids[:n].tolist()))
        assert want is not None, "the batch row is not a stored conversation"
        assert labels[:n].tolist() == want, "labels differ from the stored SFT labels"
        assert (labels[n:] == -100).all(), "padding must be -100"


def test_sft_example_masks_and_resumes(sft_server, tmp_path):
    server, stored = sft_server
    ex = _example()
    out = str(tmp_path / "run")
    full = []
    tr = ex.make_trainer(server.addr, "sft", out, steps=6, vocab=4096, save_steps=3, trainer_cls=_recording(full))
    res = tr.train()
    tr.gload_loader.close()
    assert len(full) == 6 and math.isfinite(res.training_loss) and 0 < res.training_loss < 20
    masked = 0
    for b in full:
        _check_mask(b, stored)
        masked += int(((b["labels"] == -100) & (b["attention_mask"] == 1)).sum())
    assert masked > 0, "no prompt token was masked: the batches did not carry the SFT labels"
    ckpt = os.path.join(out, "checkpoint-3")
    assert json.load(open(os.path.join(ckpt, gload.hf.STATE_FILE)))["consumed"] == 3

    resumed = []
    tr2 = ex.make_trainer(server.addr, "sft", out, steps=6, vocab=4096, save_steps=3, trainer_cls=_recording(resumed))
    tr2.train(resume_from_checkpoint=ckpt)
    tr2.gload_loader.close()
    assert len(resumed) == 3
    for i, (a, b) in enumerate(zip(full[3:], resumed)):
        for k in a:
            assert torch.equal(a[k], b[k]), f"step {4 + i}: {k} of the resumed run differs"


# A training script run as a subprocess (twice, to resume): minutes of CPU torch on a loaded 2-core machine, more than
# the suite's 300 s per test.
@pytest.mark.timeout(1200)
def test_sft_example_runs_as_a_script(sft_server, tmp_path):
    server, _ = sft_server
    cmd = [sys.executable, str(PYCLIENT / "examples" / "hf_trainer_sft.py"), "--addr", server.addr, "--dataset", "sft",
           "--out", str(tmp_path / "run"), "--steps", "2"]
    out = subprocess.run(cmd, check=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), capture_output=True,
                         text=True, timeout=300).stdout
    assert "sft done: step 2 train_loss" in out, out
    assert "trained tokens" in out, out
