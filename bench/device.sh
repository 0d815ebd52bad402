#!/usr/bin/env bash
# The one entry point of the GPU-machine benchmarks: bench/device.sh SUITE [PART], run from the repository root on
# the GPU machine with build/devrun carried (bench/prepare_devrun.sh makes it on the build machine). Results go to
# $OUT (default /tmp/out). bench/README.md says what each suite measures and how long it takes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suites="train handoff native tokenize sft mixture identity ddp integrations pytests doctor plan_compare webscale"
usage() {
	echo "usage: bench/device.sh SUITE [PART]" >&2
	echo "  suites: $suites" >&2
	echo "  tokenize parts: table (default) 10g compressed ab sweep hf-e2e" >&2
	exit 2
}
[[ $# -ge 1 ]] || usage
suite=$1
shift
cd "$here/.."
case $suite in
tokenize)
	part=${1:-table}
	case $part in
	table | 10g | compressed | ab | sweep | hf-e2e) exec bash "$here/suites/tokenize_${part//-/_}.sh" ;;
	*) usage ;;
	esac
	;;
train | handoff | native | sft | mixture | identity | ddp | integrations | pytests | doctor | plan_compare | webscale) exec bash "$here/suites/$suite.sh" "$@" ;;
*) usage ;;
esac
