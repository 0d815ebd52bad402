"""Finding the ``gload`` binary: the one the wheel bundles, or in development a checkout's or one on PATH.

Order: ``$GLOAD_BIN`` (when set it must name an executable: a wrong setting is an error, not a fallback), the wheel's
``gload/_bin/gload``, the checkout's ``bin/gload`` (``make build``) when this package is imported from a checkout's
``pyclient/``, then the first ``gload`` on ``$PATH`` that is an ELF executable (the ``gload`` console script of a
development install is a Python script that would run this very lookup again, so scripts are skipped).
"""

from __future__ import annotations

import os
from typing import List, Tuple

# This file is also loaded on its own by the console command (pyclient/_gload_cli.py): no imports of the package.

ENV_BIN = "GLOAD_BIN"

_HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(_HERE, "_bin", "gload")


class BinaryNotFound(FileNotFoundError):
    """No usable gload binary; the message lists where it was looked for."""


def _is_elf_executable(path: str) -> bool:
    try:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return False
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def find() -> Tuple[str, str]:
    """(path, where it came from) of the gload binary to run; raises BinaryNotFound naming every place tried."""
    tried: List[str] = []
    env = os.environ.get(ENV_BIN, "")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return os.path.abspath(env), f"${ENV_BIN}"
        raise BinaryNotFound(f"${ENV_BIN}={env}: not an executable file")
    if _is_elf_executable(BUNDLED):
        return BUNDLED, "bundled in the gload package"
    tried.append(BUNDLED + " (the wheel's binary; this is a development install)")
    checkout = os.path.normpath(os.path.join(_HERE, "..", "..", "bin", "gload"))
    if os.path.basename(os.path.dirname(_HERE)) == "pyclient":
        if _is_elf_executable(checkout):
            return checkout, "the checkout's bin/gload"
        tried.append(checkout + " (make build)")
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d or ".", "gload")
        if _is_elf_executable(p):
            return os.path.abspath(p), "PATH"
    tried.append("gload on $PATH")
    raise BinaryNotFound("no gload binary: looked at " + "; ".join(tried) +
                         f". Install the gload wheel, run `make build` in the checkout, or set ${ENV_BIN}")
