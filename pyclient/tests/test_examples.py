"""The examples run as a user runs them (CPU): the nanoGPT-style loop with shifted labels trains, checkpoints and
resumes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)

from conftest import PYCLIENT  # noqa: E402


# A training script run as a subprocess (twice, to resume): minutes of CPU torch on a loaded 2-core machine, more than
# the suite's 300 s per test.
@pytest.mark.timeout(1200)
def test_nanogpt_loop(server, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    cmd = [sys.executable, str(PYCLIENT / "examples" / "train_nanogpt.py"), "--addr", server.addr, "--dataset", "small",
           "--ckpt", str(ckpt), "--save-every", "5"]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run(cmd + ["--steps", "10"], check=True, env=env, capture_output=True, text=True, timeout=600).stdout
    first = float(out.split("step 10 loss ")[1].split()[0])
    assert 0 < first < 20, out
    assert torch.load(ckpt)["loader"]["consumed"] == 10
    out = subprocess.run(cmd + ["--steps", "15"], check=True, env=env, capture_output=True, text=True, timeout=600).stdout
    assert "step 15 loss" in out and torch.load(ckpt)["loader"]["consumed"] == 15
