"""The release wheel, installed as a user would: ``make test-wheel`` (after ``make wheel``).

The wheel (dist/gload-*.whl, or $GLOAD_WHEEL) is installed into a fresh venv in an empty temporary directory; every
command then runs there with PATH holding only the venv's bin (no Go, no C compiler, no checkout on sys.path), so
what passes here is what ``pip install gload-*.whl`` gives. Timings (wheel size, pip install, install to first batch)
are printed as ``measure:`` lines (pytest -s shows them; they are also written to $GLOAD_WHEEL_REPORT if set).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
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
        keep = {k: os.environ[k] for k in ("HOME", "LANG", "TMPDIR", "PIP_CACHE_DIR", "PIP_INDEX_URL") if k in os.environ}
        self.env = dict(keep, PATH=self.bin, GLOAD_NO_TORCH="1")
        self.installed_at = 0.0

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
    subprocess.run([os.path.join(e.bin, "pip"), "install", "--quiet", "--disable-pip-version-check"] + deps,
                   check=True, cwd=e.work)
    t0 = time.monotonic()
    subprocess.run([os.path.join(e.bin, "pip"), "install", "--quiet", "--disable-pip-version-check", wheel],
                   check=True, cwd=e.work)
    e.installed_at = time.monotonic()
    _measure("pip install of the wheel (dependencies already installed)", f"{e.installed_at - t0:.1f} s")
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
