"""The ``gload`` console command: replaces itself with the gload binary (see gload/_binary.py for where it is found),
passing every argument, the environment and the standard streams through unchanged.

A top-level module of its own, which loads gload/_binary.py by its file path, so that running the command does not
import the gload package (grpc, numpy: about half a second)."""

from __future__ import annotations

import importlib.util
import os
import sys


def _binary_module():
    spec = importlib.util.find_spec("gload")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        sys.stderr.write("gload: the gload package is not installed in this Python\n")
        sys.exit(127)
    path = os.path.join(list(spec.submodule_search_locations)[0], "_binary.py")
    mspec = importlib.util.spec_from_file_location("gload_binary_standalone", path)
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    return mod


def main() -> None:
    b = _binary_module()
    try:
        path, _ = b.find()
    except b.BinaryNotFound as e:
        sys.stderr.write(f"gload: {e}\n")
        sys.exit(127)
    try:
        os.execv(path, ["gload"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"gload: cannot run {path}: {e}\n")
        sys.exit(126)


if __name__ == "__main__":
    main()
