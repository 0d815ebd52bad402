"""The ``gload`` console command of the Python package: replaces itself with the gload binary (gload._binary.find),
passing every argument, the environment and the standard streams through unchanged."""

from __future__ import annotations

import os
import sys

from ._binary import BinaryNotFound, find


def main() -> None:
    try:
        path, _ = find()
    except BinaryNotFound as e:
        sys.stderr.write(f"gload: {e}\n")
        sys.exit(127)
    try:
        os.execv(path, ["gload"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"gload: cannot run {path}: {e}\n")
        sys.exit(126)


if __name__ == "__main__":
    main()
