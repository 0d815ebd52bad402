"""examples/run_clm_no_trainer_gload.py (issue 37, item 1): transformers' run_clm_no_trainer loop with the DataLoader
over a gload.Loader passed to accelerator.prepare, real accelerate on CPU. A run of two epochs checkpoints every 10
steps (step_N) or every epoch (epoch_N); runs resumed from those checkpoints - through the script's own arithmetic
with len(train_dataloader) and its skip_first_batches - print, step for step, the batches (checksums) and the losses
(dropout on) of the uninterrupted run. The loader's saved state is the batches trained, not the wrapper's read-ahead."""

from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)
try:
    import accelerate  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("accelerate not importable (pip install accelerate)", allow_module_level=True)

from conftest import PYCLIENT  # noqa: E402


def _run(capsys, *argv):
    path = PYCLIENT / "examples" / "run_clm_no_trainer_gload.py"
    spec = importlib.util.spec_from_file_location("run_clm_gload", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    capsys.readouterr()
    mod.main(list(argv))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    return {int(line.split()[1]): line for line in lines}


@pytest.fixture
def common(server, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield ["--max-length", "32", "--addr", server.addr, "--dataset", "small", "--num-train-epochs", "2",
           "--batch-size", "32"]
    torch.set_num_threads(threads)


def test_resume_from_steps_is_exact(common, tmp_path, capsys):
    full = _run(capsys, *common, "--output-dir", str(tmp_path / "a"), "--checkpointing-steps", "2")
    n = len(full)
    assert sorted(full) == list(range(1, n + 1)) and n >= 20, n
    per_epoch = sum(1 for line in full.values() if " epoch 0 " in line)
    assert n == 2 * per_epoch
    assert len({line.split()[7] for line in full.values()}) > per_epoch, "epoch 1 must not repeat epoch 0's batches"
    state = torch.load(tmp_path / "a" / "step_4" / "custom_checkpoint_0.pkl")
    assert state["consumed"] == 4 and state["epoch"] == 0, f"saved state is not the batches trained: {state}"
    # Mid epoch 1; and the last step of epoch 0 where that step is even (a step_N checkpoint exists).
    for at in [per_epoch + 3 + (per_epoch + 3) % 2] + ([per_epoch] if per_epoch % 2 == 0 else []):
        resumed = _run(capsys, *common, "--output-dir", str(tmp_path / f"r{at}"),
                       "--resume-from-checkpoint", str(tmp_path / "a" / f"step_{at}"))
        assert sorted(resumed) == list(range(at + 1, n + 1)), f"resumed from step_{at}: steps {sorted(resumed)}"
        for i in resumed:
            assert resumed[i] == full[i], f"resumed from step_{at}: step {i} differs from the uninterrupted run"


def test_resume_from_epoch_checkpoint_is_exact(common, tmp_path, capsys):
    full = _run(capsys, *common, "--output-dir", str(tmp_path / "a"), "--checkpointing-steps", "epoch")
    per_epoch = len(full) // 2
    resumed = _run(capsys, *common, "--output-dir", str(tmp_path / "b"),
                   "--resume-from-checkpoint", str(tmp_path / "a" / "epoch_0"))
    assert sorted(resumed) == list(range(per_epoch + 1, 2 * per_epoch + 1))
    for i in resumed:
        assert resumed[i] == full[i], f"resumed from epoch_0: step {i} differs"


def test_prepare_loader_itself_resumes_exactly(common, tmp_path, capsys):
    """prepare(loader) returns the Loader as it is; after load_state its len() is the whole epoch (the script's
    arithmetic), and the script iterates it instead of calling skip_first_batches on it."""
    common = common + ["--prepare-loader"]
    full = _run(capsys, *common, "--output-dir", str(tmp_path / "a"), "--checkpointing-steps", "2")
    n = len(full)
    at = n // 2 + 3 + (n // 2 + 3) % 2
    resumed = _run(capsys, *common, "--output-dir", str(tmp_path / "b"),
                   "--resume-from-checkpoint", str(tmp_path / "a" / f"step_{at}"))
    assert sorted(resumed) == list(range(at + 1, n + 1))
    for i in resumed:
        assert resumed[i] == full[i], f"step {i} differs"


def test_skip_first_batches_on_the_loader_says_what_to_do(server):
    import gload
    from accelerate import skip_first_batches

    with gload.Loader(server.addr, "small", transport="grpc") as loader:
        with pytest.raises(AttributeError, match="iterate the loader itself instead of skip_first_batches"):
            skip_first_batches(loader, 3)


def test_resharding_across_processes_is_refused(server):
    """accelerate's re-sharding of an IterableDataset across processes (what prepare does with dispatch_batches=False
    and several processes) would split gload's rank batches again: refused, naming what to do."""
    import gload
    from accelerate import Accelerator
    from accelerate.data_loader import prepare_data_loader

    Accelerator(cpu=True)
    with gload.Loader(server.addr, "small", transport="grpc") as loader:
        dl = prepare_data_loader(torch.utils.data.DataLoader(loader, batch_size=None), num_processes=2,
                                 process_index=0, put_on_device=False, dispatch_batches=False)
        with pytest.raises(gload.errors.InvalidArgument, match="do not pass the DataLoader over a gload.Loader"):
            next(iter(dl))
