"""Fixtures: a real ``gload`` binary, small datasets written by ``gload tokenize``, and ``gload serve`` subprocesses on
unix sockets in temporary directories.

The binary is $GLOAD_BIN, else built with ``go build`` from the repository root into the session's temp dir.

$GLOAD_REQUIRE_GROUPS (comma-separated: ``torch``, ``ddp``, i.e. test_torch.py, test_ddp.py) names the test files that
must run: a session where every test of a required file skipped (torch missing, say) fails, naming the group and the
skip reason. ``make test`` requires both in CI (CI=true) for the stack that has torch.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

PYCLIENT = Path(__file__).resolve().parents[1]
REPO = PYCLIENT.parent
sys.path.insert(0, str(PYCLIENT))

import gload  # noqa: E402
from gload._proto import gload_pb2 as pb  # noqa: E402
from gload._proto import gload_pb2_grpc as pb_grpc  # noqa: E402

TOKENIZER = REPO / "examples" / "udhr" / "tokenizer.json"
UDHR = REPO / "examples" / "udhr" / "corpus.jsonl.gz"

try:
    import torch  # noqa: F401

    HAVE_TORCH = not os.environ.get("GLOAD_NO_TORCH")
except ImportError:
    HAVE_TORCH = False

TRANSPORTS = ["grpc", "shm"]

# DataLoader workers: forked (torch's default on Linux) where this grpcio works in a fork child of a process that
# used gRPC (>= 1.85; this test process has), else forkserver (the Loader is pickled to workers that start from a
# process that never used gRPC). gload refuses the fork case with ForkUnsafe there (test_process_safety.py).
WORKERS_CONTEXT = None if gload._channel.grpc_fork_safe() else "forkserver"


# How long a test waits for a server that is running to answer (connect_timeout, wait_ready, wait_until): a bound for
# a broken run, never a pace. On a 2-core machine at load 20 a healthy server took over 10 s to answer a new
# connection, so anything shorter fails healthy runs. Tests of timeouts themselves use their own small values.
PATIENCE = float(os.environ.get("GLOAD_TEST_PATIENCE", "120"))


@pytest.fixture(scope="session")
def gload_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    env = os.environ.get("GLOAD_BIN")
    if env:
        return env
    out = tmp_path_factory.mktemp("bin") / "gload"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/gload"], cwd=REPO, check=True)
    return str(out)


def _words(rng: random.Random, n: int) -> str:
    vocab = ["gload", "batch", "token", "epoch", "rank", "worker", "shard", "ring", "slot", "GPU", "loss", "step",
             "human", "rights", "dignity", "freedom", "all", "are", "born", "equal", "and", "of", "the", "to", "42",
             "ümlaut", "naïve", "日本", "données", "—", "!", "?"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def write_corpus(path: Path, docs: int, seed: int, lo: int = 1, hi: int = 120) -> None:
    """A gzipped JSONL corpus of ``docs`` documents of lo..hi words, deterministic in seed."""
    rng = random.Random(seed)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for _ in range(docs):
            f.write(json.dumps({"text": _words(rng, rng.randint(lo, hi))}) + "\n")


def tokenize(gload_bin: str, corpus: Path, out: Path, *extra: str) -> Path:
    subprocess.run([gload_bin, "tokenize", "--quiet", "--tokenizer", str(TOKENIZER), "--out", str(out), *extra,
                    str(corpus)], check=True, stdout=subprocess.DEVNULL)
    return out


class Datasets:
    """The test datasets: ``small`` (600 short documents), ``other`` (another corpus, to stand in for a changed
    dataset), with their row counts."""

    def __init__(self, root: Path, gload_bin: str) -> None:
        write_corpus(root / "small.jsonl.gz", 600, seed=1)
        write_corpus(root / "other.jsonl.gz", 500, seed=2)
        self.small = tokenize(gload_bin, root / "small.jsonl.gz", root / "small")
        self.other = tokenize(gload_bin, root / "other.jsonl.gz", root / "other")
        self.rows = {"small": 600, "other": 500}


@pytest.fixture(scope="session")
def datasets(gload_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Datasets:
    return Datasets(tmp_path_factory.mktemp("data"), gload_bin)


class Server:
    """A ``gload serve`` subprocess on a unix socket. ``kill`` sends SIGKILL; ``start`` (re)starts it."""

    def __init__(self, gload_bin: str, sock: Path, datasets: Dict[str, Path], log: Path, *extra: str) -> None:
        self.bin = gload_bin
        self.sock = sock
        self.addr = f"unix://{sock}"
        self.datasets = dict(datasets)
        self.log = log
        self.extra = list(extra)
        self.proc: Optional[subprocess.Popen] = None

    def start(self, datasets: Optional[Dict[str, Path]] = None) -> "Server":
        if datasets is not None:
            self.datasets = dict(datasets)
        args = [self.bin, "serve", "--listen", self.addr, "--log-level", "warn", *self.extra]
        for name, d in self.datasets.items():
            args += ["--dataset", f"{name}={d}"]
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(args, stdout=logf, stderr=logf)
        logf.close()
        self.wait_ready()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_ready(self, timeout: float = PATIENCE) -> None:
        import grpc

        from gload._channel import open_channel

        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gload serve exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                # gload's channel: a fork child of this process knows that gRPC was used here.
                with open_channel(self.addr, None) as ch:
                    h = pb_grpc.LoaderStub(ch).Health(pb.HealthRequest(), timeout=1.0)
                    if h.serving:
                        return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gload serve not ready after {timeout} s: {self.log.read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def _short_tmp(prefix: str) -> Path:
    # Unix socket paths are limited to 107 bytes: pytest's temp dirs can be longer.
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix))


@pytest.fixture(scope="module")
def server(gload_bin: str, datasets: Datasets) -> Iterator[Server]:
    d = _short_tmp("gload-test-")
    s = Server(gload_bin, d / "s.sock", {"small": datasets.small, "other": datasets.other}, d / "serve.log").start()
    yield s
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fresh_server(gload_bin: str, datasets: Datasets) -> Iterator[Server]:
    """A server of this test's own (for tests that kill or stop it)."""
    d = _short_tmp("gload-test-")
    s = Server(gload_bin, d / "s.sock", {"small": datasets.small}, d / "serve.log")
    yield s
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


def rings_of(pid: int) -> List[str]:
    """Ring files in /dev/shm owned by server process pid."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return []
    return [n for n in names if n.startswith(f"gload-{pid}-") and n.endswith(".ring")]


def wait_until(cond, what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout} s")
        time.sleep(0.01)


def rows_of(batches) -> List[int]:
    """The dataset rows of every sequence of batches (dicts with 'index'), in order."""
    out: List[int] = []
    for b in batches:
        idx = b["index"]
        out.extend(int(i) for i in (idx.tolist() if hasattr(idx, "tolist") else idx))
    return out


# -- required groups: a whole group skipping fails the session -----------------------------------------------------

_REQUIRED = [g for g in os.environ.get("GLOAD_REQUIRE_GROUPS", "").split(",") if g]
_ran: Dict[str, int] = {}
_skip_reasons: Dict[str, str] = {}


def _group_of(nodeid: str) -> Optional[str]:
    name = Path(nodeid.split("::")[0]).stem
    return name[len("test_"):] if name.startswith("test_") else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = _group_of(report.nodeid)
    if group is None:
        return
    if (report.when == "call" and report.passed) or report.failed:
        _ran[group] = _ran.get(group, 0) + 1
    elif report.skipped and group not in _skip_reasons:
        _skip_reasons[group] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    group = _group_of(report.nodeid) if report.nodeid else None
    if group is not None and report.skipped and group not in _skip_reasons:
        _skip_reasons[group] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    missing = [g for g in _REQUIRED if not _ran.get(g)]
    if not missing or exitstatus not in (0, pytest.ExitCode.NO_TESTS_COLLECTED):
        return
    for g in missing:
        print(f"\nFAIL: required test group {g!r} (test_{g}.py) did not run: "
              f"{_skip_reasons.get(g, 'no test of it was collected')}", file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
