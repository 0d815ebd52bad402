"""Builds the release wheel: dist/gload-<version>-py3-none-manylinux_X_Y_<arch>.whl (``make wheel``).

The wheel holds the Python package (pyclient/gload), the native copier (gload/_copier.so, compiled by
scripts/build-copier.sh) and the gload binary (gload/_bin/gload, from ``make build``: cgo, NVML loaded at run time,
the Makefile's flags), and a ``gload`` console command that runs the binary. Its platform tag is read off the two
binaries (elfdeps.py: the newest GLIBC_x.y symbol version either asks for), so the tag never promises an older glibc
than the binaries need.

setuptools builds it (the backend pyclient already uses, so a checkout's ``pip install ./pyclient`` and the wheel
come from one pyproject.toml), from a copy of pyclient staged under build/wheel/ so that the checkout never holds the
binary; ``pip wheel --no-build-isolation`` runs the backend of this Python, which must have setuptools >= 70.1 and
wheel (.ci/requirements-wheel.txt).

Usage: python scripts/wheel/build.py [--bin bin/gload] [--copier pyclient/gload/_copier.so] [--out dist]
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import elfdeps  # noqa: E402


def version() -> str:
    with open(os.path.join(ROOT, "internal", "version", "VERSION")) as f:
        v = f.read().strip()
    with open(os.path.join(ROOT, "pyclient", "gload", "_version.py")) as f:
        m = re.search(r'__version__ = "([^"]+)"', f.read())
    if not m or m.group(1) != v:
        sys.exit(f"build.py: pyclient/gload/_version.py says {m and m.group(1)}, internal/version/VERSION says {v}")
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "gload"))
    ap.add_argument("--copier", default=os.path.join(ROOT, "pyclient", "gload", "_copier.so"))
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    a = ap.parse_args()
    v = version()
    out = subprocess.run([a.bin, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if not out.startswith(f"gload {v}"):
        sys.exit(f"build.py: {a.bin} --version says {out!r}, the package is {v}: rebuild it (make build)")
    needs = [elfdeps.read(a.bin), elfdeps.read(a.copier)]
    plat = elfdeps.platform_tag(needs)
    for n in needs:
        print(f"build.py: {os.path.relpath(n.path, ROOT)}: glibc {n.glibc()[0]}.{n.glibc()[1]}, links {', '.join(n.libraries)}")

    stage = os.path.join(ROOT, "build", "wheel", "src")
    shutil.rmtree(os.path.dirname(stage), ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "pyclient"), stage, ignore=shutil.ignore_patterns(
        "tests", "bench", "examples", "build", "__pycache__", "*.egg-info", "_copier*.so", "_bin"))
    pkg = os.path.join(stage, "gload")
    shutil.copy2(a.copier, os.path.join(pkg, "_copier.so"))
    os.makedirs(os.path.join(pkg, "_bin"))
    shutil.copy2(a.bin, os.path.join(pkg, "_bin", "gload"))
    os.chmod(os.path.join(pkg, "_bin", "gload"), 0o755)

    os.makedirs(a.out, exist_ok=True)
    for old in glob.glob(os.path.join(a.out, f"gload-{v}-*.whl")):
        os.remove(old)
    env = dict(os.environ, GLOAD_WHEEL_PLAT=plat)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", a.out, stage], env=env, check=True)
    whl = os.path.join(a.out, f"gload-{v}-py3-none-{plat}.whl")
    if not os.path.isfile(whl):
        sys.exit(f"build.py: expected {whl}, found {os.listdir(a.out)}")
    print(f"build.py: {os.path.relpath(whl, ROOT)} ({os.path.getsize(whl) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
