"""Who may reach the server: the default address (the user's private unix socket, mode 0600) and the bearer token
of ``gload serve --auth-token-file`` over TCP, sent by Loader, watch_report and StepReporter."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import grpc
import pytest

import gload
from conftest import Server, _short_tmp, PATIENCE
from gload._channel import open_channel
from gload._proto import gload_pb2 as pb
from gload._proto import gload_pb2_grpc as pb_grpc
from gload.watch import StepReporter, watch_report

TOKEN = "0123456789abcdef0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TokenServer(Server):
    """A server on TCP with --auth-token-file: it answers health checks only with the token."""

    def __init__(self, gload_bin, addr, datasets, log, token_file, *extra):
        super().__init__(gload_bin, Path("/nonexistent"), datasets, log, "--auth-token-file", str(token_file), *extra)
        self.addr = addr

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gload serve exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                with open_channel(self.addr, TOKEN) as ch:
                    if pb_grpc.LoaderStub(ch).Health(pb.HealthRequest(), timeout=1.0).serving:
                        return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gload serve not ready after {timeout} s: {self.log.read_text()}")
            time.sleep(0.05)


@pytest.fixture
def token_server(gload_bin, datasets, monkeypatch):
    monkeypatch.delenv("GLOAD_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("GLOAD_AUTH_TOKEN_FILE", raising=False)
    d = _short_tmp("gload-tok-")
    tf = d / "token"
    tf.write_text(TOKEN + "\n")
    tf.chmod(0o600)
    s = TokenServer(gload_bin, f"127.0.0.1:{_free_port()}", {"small": datasets.small}, d / "serve.log", tf,
                    "--no-gpu-watch")
    s.start()
    s.token_file = tf
    yield s
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


def _one_epoch(addr, **kw):
    with gload.Loader(addr, "small", batch_size=16, transport="grpc", return_tensors="np", connect_timeout=PATIENCE,
                      reconnect_timeout=0, **kw) as loader:
        return sum(len(b["input_ids"]) for b in loader)


def test_token_required_over_tcp(token_server, datasets, monkeypatch):
    with pytest.raises(gload.Unauthenticated, match="bearer token"):
        _one_epoch(token_server.addr)
    with pytest.raises(gload.Unauthenticated, match="wrong bearer token"):
        _one_epoch(token_server.addr, auth_token="x" * 32)
    # PermissionError is what a Python user catches for this.
    with pytest.raises(PermissionError):
        gload.Loader(token_server.addr, "small", return_tensors="np").datasets()
    rows = datasets.rows["small"]
    assert _one_epoch(token_server.addr, auth_token=TOKEN) == rows
    monkeypatch.setenv("GLOAD_AUTH_TOKEN", TOKEN)
    assert _one_epoch(token_server.addr) == rows, "GLOAD_AUTH_TOKEN is the default token"
    monkeypatch.delenv("GLOAD_AUTH_TOKEN")
    monkeypatch.setenv("GLOAD_AUTH_TOKEN_FILE", str(token_server.token_file))
    assert _one_epoch(token_server.addr) == rows, "so is the content of GLOAD_AUTH_TOKEN_FILE"


def test_token_for_watch_and_reports(token_server):
    with pytest.raises(gload.Unauthenticated):
        watch_report(token_server.addr, fmt="dict")
    rep = watch_report(token_server.addr, fmt="dict", auth_token=TOKEN)
    assert "verdict" in rep
    with StepReporter(token_server.addr, "tok-loop", auth_token=TOKEN) as r:
        for _ in range(5):
            r.report(0.001, 0.01)
        assert r.close() == 5


def test_token_checks():
    with pytest.raises(ValueError, match="at least 16"):
        gload.Loader("127.0.0.1:1", "small", auth_token="short")


def test_default_address(gload_bin, datasets, monkeypatch):
    run = _short_tmp("gload-xdg-")
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
        monkeypatch.delenv("GLOAD_ADDR", raising=False)
        assert gload.default_address() == f"unix://{run}/gload.sock"
        old = os.umask(0)  # the socket's mode must not follow the umask
        try:
            proc = subprocess.Popen([gload_bin, "serve", "--dataset", f"small={datasets.small}", "--no-gpu-watch",
                                     "--log-level", "warn"], env=dict(os.environ), stderr=subprocess.PIPE)
        finally:
            os.umask(old)
        try:
            sock = run / "gload.sock"
            deadline = time.monotonic() + PATIENCE
            while not sock.exists():
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "no default socket"
                time.sleep(0.05)
            mode = os.stat(sock).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, oct(mode)
            with gload.Loader(None, "small", batch_size=16, return_tensors="np", connect_timeout=PATIENCE) as loader:
                assert loader.addr == f"unix://{sock}"
                assert sum(len(b["input_ids"]) for b in loader) == datasets.rows["small"]
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    finally:
        shutil.rmtree(run, ignore_errors=True)


def test_token_file_fifo(tmp_path):
    """A FIFO as the token file is refused without waiting for a writer (issue 34 item 14)."""
    from gload._channel import read_token_file

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        read_token_file(str(fifo))
