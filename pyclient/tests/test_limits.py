"""Server-wide limits seen from Python: a stream beyond ``--max-streams`` raises gload.ResourceExhausted naming it."""

from __future__ import annotations

import shutil

import pytest

import gload
from conftest import Server, _short_tmp, PATIENCE


def test_max_streams(gload_bin, datasets):
    d = _short_tmp("gload-lim-")
    s = Server(gload_bin, d / "s.sock", {"small": datasets.small}, d / "serve.log", "--max-streams", "1",
               "--no-gpu-watch").start()
    try:
        kw = dict(batch_size=8, transport="grpc", return_tensors="np", connect_timeout=PATIENCE, reconnect_timeout=0)
        with gload.Loader(s.addr, "small", **kw) as a, gload.Loader(s.addr, "small", **kw) as b:
            next(iter(a))  # holds the one stream
            with pytest.raises(gload.ResourceExhausted, match="--max-streams"):
                next(iter(b))
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)
