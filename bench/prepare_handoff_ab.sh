#!/usr/bin/env bash
# Puts the Python client of BASE (a commit; default HEAD) in build/devrun/pyclient-NAME (default NAME=base), for
# bench/device_handoff_ab.sh. Run after bench/prepare_devrun.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE:-HEAD}
name=${NAME:-base}
rm -rf "build/devrun/pyclient-$name"
mkdir -p "build/devrun/pyclient-$name"
git archive "$base" pyclient/gload | tar -x -C "build/devrun/pyclient-$name" --strip-components=1
echo "pyclient-$name: $(git rev-parse --short "$base")"
