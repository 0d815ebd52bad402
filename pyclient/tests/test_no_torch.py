"""Without torch: asking for a device says that torch is missing (the README's example run without torch)."""

from __future__ import annotations

import importlib.util

import pytest

import gload

if importlib.util.find_spec("torch") is not None:
    pytest.skip("torch is installed here (this file checks the message without it)", allow_module_level=True)


def test_device_without_torch_names_torch() -> None:
    with pytest.raises(ValueError, match=r"device='cuda' needs torch, which is not importable"):
        gload.Loader("unix:///nonexistent/gload.sock", "ds", batch_size=4, device="cuda")


def test_version() -> None:
    assert gload.__version__.count(".") == 2
