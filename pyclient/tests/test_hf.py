"""gload.hf.GloadTrainer with the real transformers + accelerate (issue 15): a tiny GPT-2 (the example tokenizer's
4096-token vocabulary, config built in code, no hub) trains from a Loader, is resumed from a checkpoint mid-epoch,
and the batches after the resume equal those of an uninterrupted run — across an epoch boundary, with accelerate in
the Trainer. Skipped where transformers is not importable (it needs torch); under CI=true a torch without
transformers fails instead."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)
try:
    import transformers
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("transformers not importable (pip install transformers accelerate)", allow_module_level=True)

import gload  # noqa: E402
import gload.hf  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments  # noqa: E402
from conftest import PATIENCE


def tiny_model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=4096, n_positions=64, n_layer=1, n_head=2, n_embd=32))


def args(out, **kw) -> TrainingArguments:
    base = dict(output_dir=str(out), per_device_train_batch_size=64, max_steps=14, save_steps=7, logging_steps=100,
                report_to=[], learning_rate=1e-3, dataloader_num_workers=0, seed=5, disable_tqdm=True)
    if "use_cpu" in TrainingArguments.__dataclass_fields__:
        base["use_cpu"] = True
    else:  # pragma: no cover - older transformers
        base["no_cuda"] = True
    base.update(kw)
    return TrainingArguments(**base)


def recording_trainer(**kw):
    """A GloadTrainer that records the input_ids of every batch it trains on."""
    seen = []

    class Recording(gload.hf.GloadTrainer):
        def compute_loss(self, model, inputs, *a, **k):
            seen.append(inputs["input_ids"].detach().cpu().clone())
            out = super().compute_loss(model, inputs, *a, **k)
            self.losses.append(float((out[0] if isinstance(out, tuple) else out).detach()))
            return out

    tr = Recording(**kw)
    tr.losses = []
    return tr, seen


def loader(server, **kw):
    return gload.Loader(server.addr, "small", transport="grpc", max_length=64, pad_multiple=16, connect_timeout=PATIENCE,
                        **kw)


class _Epochs(transformers.TrainerCallback):
    """Records state.epoch after every step (after GloadTrainer's own callbacks)."""

    def __init__(self) -> None:
        self.at = {}

    def on_step_end(self, args, state, control, **kw):
        self.at[state.global_step] = state.epoch


def test_resume_mid_epoch_is_exact(server, tmp_path):
    l = loader(server)
    tr, full = recording_trainer(model=tiny_model(), args=args(tmp_path / "a"), train_dataset=l)
    epochs = _Epochs()
    tr.add_callback(epochs)
    epoch_len = l.epoch_batches()
    assert l._policy.batch_size == 64 and l.seed == 5  # taken from TrainingArguments: the Loader left them unset
    assert 7 < epoch_len < 14, "the run must cross an epoch boundary after the resume"
    tr.train()
    assert len(full) == 14
    ckpt = tmp_path / "a" / "checkpoint-7"
    state = json.loads((ckpt / gload.hf.STATE_FILE).read_text())
    # Exactly the 7 batches trained on (accelerate's read-ahead would say 8).
    assert state["epoch"] == 0 and state["consumed"] == 7

    l2 = loader(server)
    targs = args(tmp_path / "a")
    tr2, resumed = recording_trainer(model=tiny_model(), args=targs, train_dataset=l2)
    assert targs.ignore_data_skip is False, "GloadTrainer changed the caller's TrainingArguments"
    assert tr2.args.ignore_data_skip is True
    epochs2 = _Epochs()
    tr2.add_callback(epochs2)
    tr2.train(resume_from_checkpoint=str(ckpt))
    assert len(resumed) == 7
    # The Trainer's epoch after the resume (logs, checkpoints) is the uninterrupted run's, in the resumed epoch too.
    assert epochs2.at == {k: v for k, v in epochs.at.items() if k > 7}, (epochs.at, epochs2.at)
    for i, (a, b) in enumerate(zip(full[7:], resumed)):
        assert torch.equal(a, b), f"step {8 + i}: the resumed run trained on another batch"
    assert l2.epoch == 1  # the Trainer's epoch reached the loader
    # GPT-2's dropout (0.1) is on: the losses after the resume are the uninterrupted run's, bit for bit.
    assert tr.model.config.resid_pdrop > 0
    assert tr2.losses == tr.losses[7:], "the losses after the resume differ from the uninterrupted run's"


def test_arguments_refused_by_name(server, tmp_path):
    # transformers 5 dropped group_by_length from TrainingArguments; where it exists it is refused by name.
    has_group = "group_by_length" in TrainingArguments.__dataclass_fields__
    extra = dict(group_by_length=True) if has_group else {}
    with pytest.raises(ValueError) as e:
        gload.hf.GloadTrainer(model=tiny_model(), train_dataset=loader(server, batch_size=16, seed=1),
                              args=args(tmp_path, dataloader_num_workers=2, **extra))
    msg = str(e.value)
    wants = ["dataloader_num_workers=2", "per_device_train_batch_size=64 but Loader(batch_size=16)",
             "TrainingArguments.seed=5 but Loader(seed=1)"] + (["group_by_length=True"] if has_group else [])
    for want in wants:
        assert want in msg, msg
    with pytest.raises(ValueError, match=r"dataloader_drop_last=True but Loader\(remainder='wrap'\)"):
        gload.hf.GloadTrainer(model=tiny_model(), train_dataset=loader(server, remainder="wrap"),
                              args=args(tmp_path, dataloader_drop_last=True))
    with pytest.raises(TypeError, match="train_dataset must be a gload.Loader"):
        gload.hf.GloadTrainer(model=tiny_model(), args=args(tmp_path), train_dataset=[])


def test_plain_trainer_gets_one_clear_error(server, tmp_path):
    """Trainer(train_dataset=loader) batches the batches: the first step fails saying what to use instead."""
    tr = transformers.Trainer(model=tiny_model(), args=args(tmp_path, max_steps=1), train_dataset=loader(server))
    with pytest.raises(gload.InvalidArgument, match=r"gload.hf.GloadTrainer"):
        tr.train()


# A training script run as a subprocess (twice, to resume): minutes of CPU torch on a loaded 2-core machine, more than
# the suite's 300 s per test.
@pytest.mark.timeout(1200)
def test_example_runs_and_resumes(server, tmp_path):
    """examples/hf_trainer.py as a user runs it: 2 steps, then resumed to 4 from its checkpoint."""
    import subprocess
    import sys
    from conftest import PYCLIENT

    cmd = [sys.executable, str(PYCLIENT / "examples" / "hf_trainer.py"), "--addr", server.addr, "--dataset", "small",
           "--out", str(tmp_path / "run")]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    subprocess.run(cmd + ["--steps", "2"], check=True, env=env, timeout=600)
    assert (tmp_path / "run" / "checkpoint-2" / gload.hf.STATE_FILE).exists()
    subprocess.run(cmd + ["--steps", "4", "--resume"], check=True, env=env, timeout=600)
    state = json.loads((tmp_path / "run" / "checkpoint-4" / gload.hf.STATE_FILE).read_text())
    assert state["consumed"] == 4
