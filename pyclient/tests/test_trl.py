"""TRL's SFTTrainer over a gload SFT dataset opened with datasets.load_from_disk (issue 37, item 3): TRL's default
collator cannot pad the stored labels column; gload.hf.SFTCollator pads input_ids with the dataset's recorded pad id
and labels with -100, and SFTTrainer (real TRL, transformers, accelerate on CPU) trains on batches whose labels are
the stored SFT labels at every real token and -100 at every padding position."""

from __future__ import annotations

import inspect
import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)
try:
    import trl
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("trl not importable (pip install trl; CI installs it in the oldest stack)", allow_module_level=True)
datasets = pytest.importorskip("datasets")

import gload.hf  # noqa: E402
from conftest import REPO  # noqa: E402
from test_example_sft import _check_mask, sft_server  # noqa: E402,F401 - the fixture: 64 chat conversations, served
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel  # noqa: E402


def _config(out, **kw):
    fields = trl.SFTConfig.__dataclass_fields__
    base = dict(output_dir=str(out), per_device_train_batch_size=4, max_steps=3, report_to=[], learning_rate=1e-3,
                logging_steps=100, save_strategy="no", disable_tqdm=True, seed=3)
    base["max_seq_length" if "max_seq_length" in fields else "max_length"] = 512  # renamed in TRL 0.20
    base["use_cpu" if "use_cpu" in fields else "no_cuda"] = True
    base.update(kw)
    return trl.SFTConfig(**base)


def _tokenizer_arg(tok):
    """SFTTrainer's tokenizer argument: ``tokenizer`` in TRL 0.9, ``processing_class`` since 0.12."""
    params = inspect.signature(trl.SFTTrainer.__init__).parameters
    return {"processing_class" if "processing_class" in params else "tokenizer": tok}


def _recording(seen):
    class Recording(trl.SFTTrainer):
        def compute_loss(self, model, inputs, *a, **k):
            seen.append({key: v.detach().cpu().clone() for key, v in inputs.items()})
            return super().compute_loss(model, inputs, *a, **k)

    return Recording


def _model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=4096, n_positions=512, n_layer=1, n_head=2, n_embd=32))


def test_sft_trainer_with_the_collator(sft_server, tmp_path):  # noqa: F811 - pytest fixture
    server, stored = sft_server
    ds = datasets.load_from_disk(str(server.datasets["sft"]))
    tok = AutoTokenizer.from_pretrained(str(REPO / "examples" / "udhr"))
    pad = gload.hf.stored_pad_id(ds)
    assert pad == tok.pad_token_id, "the dataset records the tokenizer's pad token"

    # TRL's own collator, for the record: TRL 0.9's cannot pad the stored labels and says so; newer TRL pads them as
    # stored. Either is fine; training on anything but the stored labels is not.
    own = []
    try:
        _recording(own)(model=_model(), args=_config(tmp_path / "d", max_steps=1), train_dataset=ds,
                        **_tokenizer_arg(tok)).train()
    except ValueError as e:
        assert "labels" in str(e), e
    else:
        assert len(own) == 1
        for b in own:
            _check_mask(b, stored)

    seen = []
    tr = _recording(seen)(model=_model(), args=_config(tmp_path / "a"), train_dataset=ds, **_tokenizer_arg(tok),
                          data_collator=gload.hf.SFTCollator(dataset=ds))
    res = tr.train()
    assert len(seen) == 3 and 0 < res.training_loss < 20
    padded = 0
    for b in seen:
        _check_mask(b, stored)
        n = b["attention_mask"].sum(1)
        for row, k in zip(b["input_ids"], n.tolist()):
            assert (row[k:] == pad).all(), "input_ids padding is the dataset's pad id"
            padded += len(row) - k
    assert padded > 0, "no batch was padded: the test did not see the collator pad"


def test_collator_checks_its_input(sft_server):  # noqa: F811 - pytest fixture
    server, _ = sft_server
    c = gload.hf.SFTCollator(dataset=server.datasets["sft"], pad_multiple=8, return_tensors="np")
    out = c([{"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}, {"input_ids": [9]}])
    assert out["input_ids"].shape == (2, 8)
    assert out["labels"][1].tolist() == [9] + [-100] * 7, "without stored labels: input_ids, -100 at padding"
    with pytest.raises(ValueError, match="row 0: input_ids"):
        c([{"input_ids": [1, 2], "labels": [1]}])
    with pytest.raises(ValueError, match="no input_ids"):
        c([{"text": "x"}])
    with pytest.raises(ValueError, match="give pad_id"):
        gload.hf.SFTCollator()


def test_example_runs(sft_server, tmp_path):  # noqa: F811 - pytest fixture
    """examples/trl_sft.py as a user runs it: load_from_disk, AutoTokenizer, SFTTrainer with the collator."""
    import importlib.util

    from conftest import PYCLIENT

    server, _ = sft_server
    ds_dir = server.datasets["sft"]
    spec = importlib.util.spec_from_file_location("trl_sft", PYCLIENT / "examples" / "trl_sft.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--dataset", str(ds_dir), "--tokenizer", str(ds_dir.parent), "--out", str(tmp_path / "o"),
                    "--steps", "2"])
    assert res.global_step == 2 and 0 < res.training_loss < 20
