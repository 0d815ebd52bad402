"""examples/train_accelerate.py (issue 15): a plain accelerate loop (real accelerate, CPU) fed by gload.Loader, with the
loader's state in accelerate's checkpoint. Run A trains 6 steps straight; run B trains 3,
checkpoints, and a new process-like run resumes from the checkpoint to 6: steps 4-6 see the same batches (checksums)
with bit-identical losses, and accelerate's checkpoint holds the loader's state after exactly 3 batches."""

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
    spec = importlib.util.spec_from_file_location("train_accelerate", PYCLIENT / "examples" / "train_accelerate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    capsys.readouterr()
    mod.main(list(argv))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    return {int(line.split()[1]): line for line in lines}


# A training script run as a subprocess (twice, to resume): minutes of CPU torch on a loaded 2-core machine, more than
# the suite's 300 s per test.
@pytest.mark.timeout(1200)
def test_accelerate_loop_resumes_exactly(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    common = ["--addr", server.addr, "--dataset", "small", "--save-every", "3"]
    full = _run(capsys, *common, "--steps", "6", "--ckpt", str(tmp_path / "a"))
    assert sorted(full) == [1, 2, 3, 4, 5, 6]
    assert all(0 < float(line.split()[3]) < 20 for line in full.values())
    first = _run(capsys, *common, "--steps", "3", "--ckpt", str(tmp_path / "b"))
    assert [first[i] for i in (1, 2, 3)] == [full[i] for i in (1, 2, 3)]
    custom = torch.load(tmp_path / "b" / "custom_checkpoint_0.pkl")
    assert custom["consumed"] == 3 and custom["epoch"] == 0, custom
    resumed = _run(capsys, *common, "--steps", "6", "--ckpt", str(tmp_path / "b"))
    assert sorted(resumed) == [4, 5, 6], "the resumed run did not start after the checkpoint's step"
    for i in (4, 5, 6):
        assert resumed[i] == full[i], f"step {i} after the resume differs from the uninterrupted run"
    assert len({full[i].split()[5] for i in full}) == 6, "every step must see another batch"
