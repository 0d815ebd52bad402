#!/usr/bin/env bash
# Puts the Python client of BASE (a commit; default HEAD) in build/devrun/pyclient-base, for bench/device_handoff_ab.sh.
# Run after bench/prepare_devrun.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE:-HEAD}
rm -rf build/devrun/pyclient-base
mkdir -p build/devrun/pyclient-base
git archive "$base" pyclient/gload | tar -x -C build/devrun/pyclient-base --strip-components=1
echo "pyclient-base: $(git rev-parse --short "$base")"
