"""The examples run as a user runs them (CPU): the nanoGPT-style loop with shifted labels trains, checkpoints and
resumes exactly."""

from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)

from conftest import PYCLIENT  # noqa: E402


def _nanogpt(capsys, *argv):
    spec = importlib.util.spec_from_file_location("train_nanogpt", PYCLIENT / "examples" / "train_nanogpt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    capsys.readouterr()
    mod.main(list(argv))
    return {int(ln.split()[1]): ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("iter ")}


# Three runs of the example in process: minutes of CPU torch on a loaded 2-core machine, more than the suite's 300 s.
@pytest.mark.timeout(1200)
def test_nanogpt_resumes_mid_run_exactly(server, tmp_path, capsys, monkeypatch):
    """nanoGPT's loop (issue 37, item 4): it fetches the next batch before the step and checkpoints between the two,
    and its loss estimate reads batches too. The example saves the position taken before each fetch and estimates on
    Loaders of their own: a run stopped after iteration 13 (checkpoint at 12, in epoch 0) and resumed prints the
    losses of the uninterrupted run for every later iteration, across the epoch boundary. Saving
    ``loader.state_dict()`` at checkpoint time instead (--naive-state) skips the batch fetched ahead."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        common = ["--addr", server.addr, "--dataset", "small", "--max-iters", "24", "--eval-interval", "6",
                  "--eval-iters", "2", "--batch-size", "16", "--block-size", "64"]
        full = _nanogpt(capsys, *common, "--out-dir", str(tmp_path / "a"))
        assert sorted(full) == list(range(1, 25))
        assert " epoch 0" in full[12] and " epoch 1" in full[24], "the run must cross an epoch boundary"
        _nanogpt(capsys, *common, "--out-dir", str(tmp_path / "b"), "--stop-after", "13")
        resumed = _nanogpt(capsys, *common, "--out-dir", str(tmp_path / "b"), "--init-from", "resume")
        assert sorted(resumed) == list(range(13, 25))
        for i in resumed:
            assert resumed[i] == full[i], f"iteration {i} after the resume differs from the uninterrupted run"
        _nanogpt(capsys, *common, "--out-dir", str(tmp_path / "c"), "--stop-after", "13", "--naive-state")
        naive = _nanogpt(capsys, *common, "--out-dir", str(tmp_path / "c"), "--init-from", "resume", "--naive-state")
        assert naive[13] != full[13], "the naive state should have skipped the batch fetched ahead"
    finally:
        torch.set_num_threads(threads)


@pytest.mark.timeout(1200)
def test_example_over_a_dataset_path(datasets, tmp_path, monkeypatch):
    """examples/train_torch.py as README's quick start runs it: a dataset directory, no gload serve anywhere (the
    Loader starts the job's server from GLOAD_BIN and it exits after the script); resumed from its checkpoint."""
    import subprocess
    import sys

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", GLOAD_JOB=f"example-{os.getpid()}")
    cmd = [sys.executable, str(PYCLIENT / "examples" / "train_torch.py"), "--dataset", str(datasets.small),
           "--vocab", "4096", "--steps", "3", "--save", str(tmp_path / "ckpt.pt")]
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True, timeout=600).stdout
    assert "shapes this epoch:" in out, out
    assert torch.load(tmp_path / "ckpt.pt")["loader"]["consumed"] >= 3
