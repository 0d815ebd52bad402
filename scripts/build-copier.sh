#!/usr/bin/env bash
# Compiles the Python client's native batch copier, pyclient/gload/_copier.c, into pyclient/gload/_copier.so (plain
# C, no Python API: one build serves every Python of the machine; under a second). Used by scripts/setup.sh and the
# GPU-machine suites (bench/suites/native.sh); pip builds the same file as an optional extension (pyclient/setup.py).
set -euo pipefail
cd "$(dirname "$0")/.."
${CC:-cc} -O3 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden -o pyclient/gload/_copier.so \
	pyclient/gload/_copier.c -ldl -lpthread
