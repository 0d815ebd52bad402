"""A Loader given a dataset path finds or starts its node's job server (gload._autostart): real processes, real
sockets, the real binary ($GLOAD_BIN). Every test has a private run directory (XDG_RUNTIME_DIR) and job key, so
servers of other tests or users are never touched."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List

import pytest

import gload
from gload import _autostart

from conftest import rows_of, wait_until

PYCLIENT = str(Path(__file__).resolve().parents[1])


@pytest.fixture
def job(gload_bin: str, monkeypatch: pytest.MonkeyPatch):
    """A private run directory and job key for this test, in this process's environment and its children's."""
    run = Path(tempfile.mkdtemp(prefix="gl-run-"))  # short: socket paths are limited to 107 bytes
    run.chmod(0o700)
    key = f"t{os.getpid()}-{time.monotonic_ns() % 10**9}"
    env = {"XDG_RUNTIME_DIR": str(run), "GLOAD_JOB": key, "GLOAD_BIN": gload_bin, "GLOAD_NO_TORCH": "1",
           "GLOAD_SERVER_NO_GPU_WATCH": "1", "GLOAD_SERVER_IDLE_EXIT": "30"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("GLOAD_ADDR", raising=False)
    for k in list(os.environ):
        if k.startswith("GLOAD_SERVER_") and k not in env:
            monkeypatch.delenv(k)
    yield {"run": run, "key": key, "env": dict(os.environ),
           "sock": run / f"gload-job-{key}.sock", "lock": run / f"gload-job-{key}.lock", "log": run / f"gload-job-{key}.log"}
    for k in list(os.environ):  # what configure_server set
        if k.startswith("GLOAD_SERVER_") and k not in env:
            del os.environ[k]
    # Nothing of a server may outlive its test: kill what is left (the test fails on its own if that matters).
    pid = _server_pid(str(run / f"gload-job-{key}.sock"))
    if pid:
        os.kill(pid, signal.SIGKILL)


def _server_pid(sock: str) -> int:
    """The pid of the process listening on ``sock`` (the kernel's peer credentials), 0 if none."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(sock)
            pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
            return pid
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# A child process: a Loader over a path; prints one JSON line of what it saw, then waits for a line on stdin
# (so that the test decides when it exits) unless told not to.
CHILD = textwrap.dedent("""
    import json, os, socket, struct, sys
    import gload
    path, rank, world, wait = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "wait"
    l = gload.Loader(path, batch_size=8, rank=rank, world_size=world, eval=True, keys=["input_ids", "index"])
    rows = [int(i) for b in l for i in b["index"].tolist()]
    s = socket.socket(socket.AF_UNIX); s.connect(l.addr[len("unix://"):])
    pid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    print(json.dumps({"rows": rows, "server": pid, "started": l._auto.started, "log": l._auto.log,
                      "report": l.report(gpu=False)}), flush=True)
    if wait:
        sys.stdin.readline()
""")


def _child(env: Dict[str, str], path: Path, rank: int = 0, world: int = 1, wait: bool = True) -> subprocess.Popen:
    env = dict(env, PYTHONPATH=PYCLIENT + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(rank), str(world), "wait" if wait else "go"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=60)
        raise AssertionError(f"child exited {p.returncode}: {p.stderr.read()[-3000:]}")
    return json.loads(line)


def _finish(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        try:
            p.stdin.write("\n")
            p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
    for p in procs:
        p.wait(timeout=120)
        assert p.returncode == 0, p.stderr.read()[-3000:]


def _gone(job, pid: int) -> None:
    """The server exited and left nothing: no socket, no lock, no ring."""
    assert not _alive(pid), f"server {pid} still running"
    assert not job["sock"].exists(), f"{job['sock']} left behind"
    assert not job["lock"].exists(), f"{job['lock']} left behind"
    if os.path.isdir("/dev/shm"):
        left = [n for n in os.listdir("/dev/shm") if n.startswith(f"gload-{pid}-")]
        assert not left, f"rings left in /dev/shm: {left}"


def test_loader_over_a_path(job, datasets, monkeypatch) -> None:
    with gload.Loader(str(datasets.small), batch_size=16, eval=True, keys=["input_ids", "index"]) as l:
        rows = rows_of(l)
        assert sorted(rows) == list(range(datasets.rows["small"]))
        assert l.addr == f"unix://{job['sock']}"
        assert l.paths == {l.dataset: str(datasets.small)}
        rep = l.report(gpu=False)
        assert str(job["log"]) in rep and "started by this process" in rep, rep
        # A second Loader of the same process (and the relative form of the path) attaches to the same server.
        monkeypatch.chdir(datasets.small.parent)
        l2 = gload.Loader(datasets.small.name, batch_size=16)
        assert l2.addr == l.addr and l2.dataset == str(datasets.small)  # named by the server on first contact
        assert len(l2) > 0 and l2.dataset == l.dataset
        assert not l2._auto.started
        l2.close()
    assert "msg=serving" in job["log"].read_text()


def test_eight_processes_start_one_server(job, datasets) -> None:
    procs = [_child(job["env"], datasets.small) for _ in range(8)]
    try:
        got = [_result(p) for p in procs]
    finally:
        _finish(procs)
    servers = {g["server"] for g in got}
    assert len(servers) == 1, servers
    assert sum(g["started"] for g in got) == 1, [g["started"] for g in got]
    for g in got:
        assert sorted(g["rows"]) == list(range(datasets.rows["small"]))
    # Every child has exited: the starter is gone and no client is left, so the server goes at once.
    pid = servers.pop()
    wait_until(lambda: not _alive(pid), "server exit after its job", timeout=60)
    _gone(job, pid)


def test_two_ranks_share_one_server(job, datasets) -> None:
    procs = [_child(job["env"], datasets.small, rank=r, world=2) for r in range(2)]
    try:
        a, b = [_result(p) for p in procs]
    finally:
        _finish(procs)
    assert a["server"] == b["server"]
    assert not set(a["rows"]) & set(b["rows"])
    assert sorted(a["rows"] + b["rows"]) == list(range(datasets.rows["small"]))


def test_starter_killed(job, datasets) -> None:
    """SIGKILL to the process that started the server: the server goes (at once; within its idle time at the
    latest), leaving no socket, lock or ring, and the job's next Loader starts a fresh server."""
    starter = _child(job["env"], datasets.small)
    first = _result(starter)
    pid = first["server"]
    assert first["started"] and _alive(pid)
    t0 = time.monotonic()
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    wait_until(lambda: not _alive(pid), "server exit after its starter was killed", timeout=30)  # = idle_exit
    took = time.monotonic() - t0
    _gone(job, pid)
    assert "has exited and no client is connected" in job["log"].read_text()
    again = _child(job["env"], datasets.small, wait=False)
    second = _result(again)
    _finish([again])
    assert second["started"] and second["server"] != pid
    print(f"server gone {took:.2f} s after its starter was killed")


def test_idle_exit_then_fresh_server(job, datasets) -> None:
    gload.configure_server(idle_exit=0.3)
    l = gload.Loader(str(datasets.small), batch_size=16)
    next(iter(l))
    pid = _server_pid(str(job["sock"]))
    # The Loader keeps its connection: the server stays while it is open, whatever the idle time.
    time.sleep(1.0)
    assert _alive(pid)
    l.close()
    wait_until(lambda: not _alive(pid), "idle exit", timeout=60)
    _gone(job, pid)
    # The closed Loader comes back on a fresh server (same dataset name: the name is a function of the path).
    name = l.dataset
    assert len(rows_of(gload.Loader(str(datasets.small), batch_size=16, eval=True, keys=["index"]))) == 600
    assert _server_pid(str(job["sock"])) not in (0, pid)
    assert sum(1 for _ in l) > 0 and l.dataset == name


def test_server_that_cannot_start(job, datasets, tmp_path) -> None:
    """A server that fails fails the Loader with the reason and its log's tail, quickly: never a hang."""
    gload.configure_server(args="--no-such-flag")
    t0 = time.monotonic()
    with pytest.raises(gload.ServerStartError) as e:
        gload.Loader(str(datasets.small), batch_size=16)
    assert time.monotonic() - t0 < 60
    msg = str(e.value)
    assert "exited with status" in msg and str(job["log"]) in msg and "no-such-flag" in msg, msg
    gload.configure_server(args=None)
    # A binary that never answers: the start timeout ends the wait and the process.
    hang = tmp_path / "gload"
    hang.write_text("#!/bin/sh\necho 'stuck on purpose' >&2\nexec sleep 600\n")
    hang.chmod(0o755)
    os.environ["GLOAD_BIN"] = str(hang)
    gload.configure_server(start_timeout=1.5)
    with pytest.raises(gload.ServerStartError, match="(?s)did not answer.*stuck on purpose") as e:
        gload.Loader(str(datasets.small), batch_size=16)
    assert not job["lock"].exists() and not job["sock"].exists()


def test_missing_path_and_binary(job, datasets, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gload.Loader(str(tmp_path / "nope"), batch_size=16)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="is not a dataset .no state.json.: make one with gload tokenize"):
        gload.Loader(str(tmp_path / "empty"), batch_size=16)
    (tmp_path / "interrupted").mkdir()
    (tmp_path / "interrupted" / "gload.progress.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="interrupted.*--resume"):
        gload.Loader(str(tmp_path / "interrupted"), batch_size=16)
    with pytest.raises(ValueError, match="needs a dataset name"):
        gload.Loader("unix:///tmp/x.sock", batch_size=16)
    with pytest.raises(ValueError, match="by keyword"):
        gload.Loader(str(datasets.small), 16)
    os.environ["GLOAD_BIN"] = str(tmp_path / "missing")
    with pytest.raises(gload.ServerStartError, match="GLOAD_BIN"):
        gload.Loader(str(datasets.small), batch_size=16)


def test_explicit_address_with_a_path(server, datasets) -> None:
    """A path given with an explicit address is opened on that (long-lived) server; names still work."""
    l = gload.Loader(server.addr, str(datasets.other), batch_size=16, eval=True, keys=["index"])
    assert sorted(rows_of(l)) == list(range(datasets.rows["other"]))
    assert l._auto is None and l.paths == {l.dataset: str(datasets.other)}
    assert len(rows_of(gload.Loader(server.addr, "small", batch_size=16, eval=True, keys=["index"]))) == 600


def test_configure_server(monkeypatch) -> None:
    monkeypatch.delenv("GLOAD_SERVER_MAX_PREFETCH", raising=False)
    with pytest.raises(ValueError, match="unknown setting"):
        gload.configure_server(max_prefetchh=3)
    with pytest.raises(ValueError, match="integer"):
        gload.configure_server(max_prefetch=-1)
    s = gload.configure_server(max_prefetch=32, no_gpu_watch=True, idle_exit=5)
    assert s["max_prefetch"] == 32 and os.environ["GLOAD_SERVER_MAX_PREFETCH"] == "32"
    args = _autostart.server_args(s)
    assert "--max-prefetch" in args and args[args.index("--max-prefetch") + 1] == "32" and "--no-gpu-watch" in args
    gload.configure_server(max_prefetch=None, no_gpu_watch=None, idle_exit=None)
    assert "GLOAD_SERVER_MAX_PREFETCH" not in os.environ
    monkeypatch.setenv("GLOAD_SERVER_IDLE_EXIT", "soon")
    with pytest.raises(ValueError, match="GLOAD_SERVER_IDLE_EXIT"):
        _autostart.current_settings()


@pytest.mark.parametrize("env, want", [
    ({"GLOAD_JOB": "my job/1"}, "my_job_1"),
    ({"SLURM_JOB_ID": "4242"}, "slurm4242"),
    ({"TORCHELASTIC_RUN_ID": "abc", "MASTER_PORT": "29500"}, "torchrunabc-29500"),
    ({}, f"pg{os.getpgrp()}"),
])
def test_job_key(monkeypatch, env, want) -> None:
    for k in ("GLOAD_JOB", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_PORT", "GLOAD_SERVER_JOB"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _autostart.job_key() == want


def test_dataloader_workers_share_the_server(job, datasets) -> None:
    """DataLoader workers (forked, torch's default) of a Loader made from a path, in a fresh process: no gRPC ran in
    the parent before the fork (so any grpcio works), every worker opens the path on the one server, every row
    comes once."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import sys, torch, gload
        l = gload.Loader(sys.argv[1], batch_size=16, eval=True, keys=["index"])
        dl = torch.utils.data.DataLoader(l, batch_size=None, num_workers=2, multiprocessing_context="fork")
        rows = sorted(int(i) for b in dl for i in b["index"].tolist())
        assert rows == list(range(int(sys.argv[2]))), rows[:20]
        assert l._auto.started
        print("ok", l._auto.pid)
    """)
    env = dict(job["env"], PYTHONPATH=PYCLIENT)
    env.pop("GLOAD_NO_TORCH")
    p = subprocess.run([sys.executable, "-c", code, str(datasets.small), str(datasets.rows["small"])], env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr[-3000:]


@pytest.mark.parametrize("transport", ["shm", "grpc"])
def test_server_killed_mid_epoch(job, datasets, transport) -> None:
    """The job's server dies (SIGKILL: its socket and lock stay behind): the Loader starts a fresh one over the stale
    files, opens its path there and finishes the epoch where it stood: every row once."""
    l = gload.Loader(str(datasets.small), batch_size=16, eval=True, keys=["index"], transport=transport)
    it = iter(l)
    rows = rows_of([next(it) for _ in range(5)])
    pid = _server_pid(str(job["sock"]))
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), "server killed", timeout=30)
    assert job["sock"].exists() and job["lock"].exists()  # what a killed server leaves
    rows += rows_of(it)
    assert sorted(rows) == list(range(datasets.rows["small"]))
    assert l._auto.started and l._auto.pid != pid and _server_pid(str(job["sock"])) == l._auto.pid
    assert l.stats()["reconnects"] == 1
    l.close()
    # The fresh server swept the killed one's rings when it started.
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"gload-{pid}-")]


def test_logs_are_tidied_when_a_server_starts(job, datasets) -> None:
    """Starting a server moves its own log aside past 16 MiB and removes other jobs' logs a week old whose server is
    gone (no lock), keeping the recent ones, those of running servers and anything that is not a job log."""
    run, week = job["run"], time.time() - 8 * 86400
    files = {name: run / name for name in ("gload-job-old.log", "gload-job-old.log.1", "gload-job-recent.log",
                                           "gload-job-running.log", "gload-job-running.lock", "notes.log")}
    for path in files.values():
        path.write_text("x\n")
    for name in ("gload-job-old.log", "gload-job-old.log.1", "gload-job-running.log", "notes.log"):
        os.utime(files[name], (week, week))
    job["log"].write_bytes(b"y" * (16 << 20) + b"\n")
    with gload.Loader(str(datasets.small), batch_size=16) as l:
        assert len(l) > 0
    gone = {n for n, p in files.items() if not p.exists()}
    assert gone == {"gload-job-old.log", "gload-job-old.log.1"}, gone
    assert Path(str(job["log"]) + ".1").stat().st_size > 16 << 20, "the big log was moved aside"
    assert job["log"].stat().st_size < 1 << 20 and "starts:" in job["log"].read_text(), "a fresh log"
