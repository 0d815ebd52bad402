"""The release wheel, installed as a user would: ``make test-wheel`` (after ``make wheel``).

The wheel (dist/gload-*.whl, or $GLOAD_WHEEL) is installed into a fresh venv in an empty temporary directory; every
command then runs there with PATH holding only the venv's bin (no Go, no C compiler, no checkout on sys.path), so
what passes here is what ``pip install gload-*.whl`` gives. Timings (wheel size, pip install, install to first batch)
are printed as ``measure:`` lines (pytest -s shows them; they are also written to $GLOAD_WHEEL_REPORT if set).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import elfdeps  # noqa: E402


def _measure(name: str, value: str) -> None:
    line = f"measure: {name}: {value}"
    print(line)
    path = os.environ.get("GLOAD_WHEEL_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@pytest.fixture(scope="session")
def wheel() -> str:
    path = os.environ.get("GLOAD_WHEEL")
    if not path:
        found = sorted(glob.glob(os.path.join(ROOT, "dist", "gload-*.whl")), key=os.path.getmtime)
        if not found:
            pytest.fail("no dist/gload-*.whl: run make wheel first (make test-wheel does)")
        path = found[-1]
    _measure("wheel size", f"{os.path.getsize(path) / 1e6:.1f} MB ({os.path.basename(path)})")
    return path


def check_tag(tag: str, needs: "list[elfdeps.Needs]") -> None:
    """Raises AssertionError when the manylinux ``tag`` promises less than ``needs`` require."""
    parsed = elfdeps.parse_tag(tag)
    assert parsed is not None, f"platform tag {tag!r} is not manylinux_X_Y_ARCH"
    glibc, arch = parsed
    for n in needs:
        assert n.arch == arch, f"{n.path} is {n.arch}, the tag says {arch}"
        assert n.glibc() <= glibc, (f"{tag} promises glibc {glibc[0]}.{glibc[1]}, but {os.path.basename(n.path)} "
                                    f"needs GLIBC_{n.glibc()[0]}.{n.glibc()[1]}")
        assert not n.foreign(), f"{n.path} links {n.foreign()}, not provided by manylinux systems"


def _unpack_binaries(whl: str, dest: str) -> "list[str]":
    with zipfile.ZipFile(whl) as z:
        names = [n for n in z.namelist() if n in ("gload/_bin/gload", "gload/_copier.so")]
        assert sorted(names) == ["gload/_bin/gload", "gload/_copier.so"], f"{whl} holds {names}"
        for n in names:
            z.extract(n, dest)
    return [os.path.join(dest, n) for n in names]


def test_tag_tells_the_truth(wheel: str, tmp_path) -> None:
    name = os.path.basename(wheel)[:-len(".whl")]
    _, _, py, abi, plat = name.split("-")
    assert (py, abi) == ("py3", "none"), name
    needs = [elfdeps.read(p) for p in _unpack_binaries(wheel, str(tmp_path))]
    check_tag(plat, needs)
    # The check fails a tag one glibc minor older than the binaries need (what a wrong tag would promise).
    major, minor = max(n.glibc() for n in needs)
    with pytest.raises(AssertionError, match="promises glibc"):
        check_tag(f"manylinux_{major}_{minor - 1}_{needs[0].arch}", needs)


def test_elfdeps_agrees_with_objdump(wheel: str, tmp_path) -> None:
    """The pyelftools reader against binutils, where binutils is installed (a second opinion, not a requirement)."""
    if not shutil.which("objdump"):
        pytest.skip("objdump not installed (binutils): nothing to compare with")
    import re
    for p in _unpack_binaries(wheel, str(tmp_path)):
        out = subprocess.run(["objdump", "-T", p], capture_output=True, text=True, check=True).stdout
        vs = [tuple(map(int, m)) for m in re.findall(r"\bGLIBC_(\d+)\.(\d+)", out)]
        assert max(vs) == elfdeps.read(p).glibc(), p


# -- the installed wheel --------------------------------------------------------------------------------------------


class Env:
    """A fresh venv with the wheel installed, in an empty directory; run() runs commands there with a PATH of the
    venv's bin alone."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.venv = os.path.join(root, "venv")
        self.bin = os.path.join(self.venv, "bin")
        self.python = os.path.join(self.bin, "python")
        self.work = os.path.join(root, "work")
        os.makedirs(self.work)
        self.run_dir = os.path.join(root, "run")  # the private socket directory (XDG_RUNTIME_DIR) of these tests
        os.makedirs(self.run_dir, mode=0o700)
        keep = {k: os.environ[k] for k in ("HOME", "LANG", "TMPDIR", "PIP_CACHE_DIR", "PIP_INDEX_URL") if k in os.environ}
        self.env = dict(keep, PATH=self.bin, GLOAD_NO_TORCH="1", XDG_RUNTIME_DIR=self.run_dir,
                        GLOAD_SERVER_NO_GPU_WATCH="1")
        self.data = os.path.join(self.work, "data", "udhr")

    def run(self, args: "list[str]", timeout: float = 300, check: bool = True, **kw) -> subprocess.CompletedProcess:
        env = dict(self.env, **kw.pop("env", {}))
        p = subprocess.run(args, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"{args} exited {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}")
        return p


@pytest.fixture(scope="session")
def env(wheel: str, tmp_path_factory) -> Env:
    root = str(tmp_path_factory.mktemp("fresh"))
    e = Env(root)
    subprocess.run([sys.executable, "-m", "venv", e.venv], check=True)
    # The dependencies (grpcio, protobuf, numpy) first: their download is not the wheel's install time.
    deps = ["grpcio>=1.51", "protobuf>=4.21", "numpy>=1.24"]
    td = time.monotonic()
    subprocess.run([os.path.join(e.bin, "pip"), "install", "--quiet", "--disable-pip-version-check"] + deps,
                   check=True, cwd=e.work)
    _measure("pip install grpcio protobuf numpy (not the wheel's time; from pip's cache when warm)",
             f"{time.monotonic() - td:.1f} s")
    # The user's first minutes: install, tokenize the example, first batch from a Loader over the path.
    shutil.copytree(os.path.join(ROOT, "examples", "udhr"), os.path.join(e.work, "udhr"))
    t0 = time.monotonic()
    subprocess.run([os.path.join(e.bin, "pip"), "install", "--quiet", "--disable-pip-version-check", wheel],
                   check=True, cwd=e.work)
    t1 = time.monotonic()
    e.run(["gload", "tokenize", "--quiet", "--tokenizer", "udhr/tokenizer.json", "--append-eos", "--out", "data/udhr",
           "udhr/corpus.jsonl.gz"])
    t2 = time.monotonic()
    e.run([e.python, "-c", "import gload; next(iter(gload.Loader('data/udhr', batch_size=16)))"],
          env={"GLOAD_JOB": "first-batch"})
    t3 = time.monotonic()
    _measure("pip install of the wheel (dependencies already installed)", f"{t1 - t0:.1f} s")
    _measure("gload tokenize of examples/udhr", f"{t2 - t1:.1f} s")
    _measure("Loader('data/udhr') to its first batch (fresh process, server started)", f"{t3 - t2:.1f} s")
    _measure("pip install to first batch", f"{t3 - t0:.1f} s")
    return e


def test_clean_environment(env: Env) -> None:
    p = env.run([env.python, "-c", "import shutil, sys, gload; print(shutil.which('go'), shutil.which('cc'), "
                 "shutil.which('gcc'), gload.__file__); print(sys.path)"])
    which_go, which_cc, which_gcc, where = p.stdout.splitlines()[0].split()
    assert (which_go, which_cc, which_gcc) == ("None", "None", "None"), p.stdout
    assert where.startswith(env.venv), where
    assert ROOT not in p.stdout.splitlines()[1], p.stdout


def test_version_everywhere(env: Env) -> None:
    cli = env.run(["gload", "--version"]).stdout.strip()
    py = env.run([env.python, "-c", "import gload, importlib.metadata as m; print(gload.__version__, m.version('gload'))"])
    mod, meta = py.stdout.split()
    with open(os.path.join(ROOT, "internal", "version", "VERSION")) as f:
        want = f.read().strip()
    assert mod == meta == want, py.stdout
    assert cli == f"gload {want}" or cli.startswith(f"gload {want}+"), cli


def test_native_copier_loads(env: Env) -> None:
    p = env.run([env.python, "-c", "import gload._native as n; print(n.AVAILABLE, n.WHY_NOT)"])
    assert p.stdout.startswith("True"), p.stdout


def test_tokenized_example(env: Env) -> None:
    """The fixture tokenized examples/udhr with the installed `gload` command: the dataset is complete."""
    out = env.run(["gload", "inspect", "data/udhr"]).stdout
    assert "rows" in out, out
    assert os.path.isfile(os.path.join(env.data, "gload.index"))


# A Loader over the path in a child process of the fresh venv: prints what it saw as one JSON line, then waits for a
# line on stdin (so that the test decides when it exits) unless told "go".
CHILD = textwrap.dedent("""
    import json, socket, struct, sys
    import gload
    rank, world, wait = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "wait"
    l = gload.Loader("data/udhr", batch_size=8, rank=rank, world_size=world, eval=True, keys=["input_ids", "index"])
    rows = [int(i) for b in l for i in b["index"].tolist()]
    s = socket.socket(socket.AF_UNIX); s.connect(l.addr[len("unix://"):])
    server = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    total = [d["rows"] for d in l.datasets() if d["name"] == l.dataset][0]
    print(json.dumps({"rows": rows, "total": total, "server": server, "started": l._auto.started,
                      "sock": l.addr[len("unix://"):], "lock": l._auto.lock}), flush=True)
    if wait:
        sys.stdin.readline()
""")


def _child(env: Env, job: str, rank: int = 0, world: int = 1, wait: bool = True) -> subprocess.Popen:
    return subprocess.Popen([env.python, "-c", CHILD, str(rank), str(world), "wait" if wait else "go"],
                            cwd=env.work, env=dict(env.env, GLOAD_JOB=job, GLOAD_SERVER_IDLE_EXIT="20"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=60)
        raise AssertionError(f"child exited {p.returncode}: {p.stderr.read()[-3000:]}")
    return json.loads(line)


def _finish(procs: "list[subprocess.Popen]") -> None:
    for p in procs:
        try:
            p.stdin.write("\n")
            p.stdin.flush()
        except OSError:
            pass
    for p in procs:
        p.wait(timeout=120)
        assert p.returncode == 0, p.stderr.read()[-3000:]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, within: float) -> float:
    t0 = time.monotonic()
    while _alive(pid):
        if time.monotonic() - t0 > within:
            raise AssertionError(f"server {pid} still running {within} s later")
        time.sleep(0.02)
    return time.monotonic() - t0


def _no_leftovers(r: dict, pid: int) -> None:
    for p in (r["sock"], r["lock"]):
        assert not os.path.exists(p), f"{p} left behind"
    left = [n for n in os.listdir("/dev/shm") if n.startswith(f"gload-{pid}-")] if os.path.isdir("/dev/shm") else []
    assert not left, f"rings left in /dev/shm: {left}"


def test_loader_over_a_path_one_epoch(env: Env) -> None:
    p = _child(env, "epoch", wait=False)
    r = _result(p)
    _finish([p])
    assert r["started"]
    assert sorted(r["rows"]) == list(range(r["total"])), "every row once"
    _wait_gone(r["server"], 20)  # its starter exited, no client is left
    _no_leftovers(r, r["server"])


def test_two_processes_share_one_server(env: Env) -> None:
    procs = [_child(env, "shared", rank=k, world=2) for k in range(2)]
    try:
        a, b = [_result(p) for p in procs]
    finally:
        _finish(procs)
    assert a["server"] == b["server"], "one server for the job"
    assert a["started"] != b["started"], "one of them started it"
    assert not set(a["rows"]) & set(b["rows"])
    assert sorted(a["rows"] + b["rows"]) == list(range(a["total"])), "every row once across the two ranks"
    _wait_gone(a["server"], 20)
    _no_leftovers(a, a["server"])


def test_starter_killed_then_fresh_server(env: Env) -> None:
    starter = _child(env, "killed")
    first = _result(starter)
    pid = first["server"]
    assert first["started"] and _alive(pid)
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    took = _wait_gone(pid, 20)  # within the idle time (GLOAD_SERVER_IDLE_EXIT=20)
    _measure("server gone after its starter got SIGKILL", f"{took:.2f} s")
    _no_leftovers(first, pid)
    again = _child(env, "killed", wait=False)
    second = _result(again)
    _finish([again])
    assert second["started"] and second["server"] != pid, "a later job starts a fresh server"
    _wait_gone(second["server"], 20)
    _no_leftovers(second, second["server"])
