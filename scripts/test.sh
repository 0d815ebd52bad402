#!/usr/bin/env bash
# Every test suite of the project (make test, and so CI): sets up what the tests need, then runs each suite in turn,
# goes on after a failure, and ends with one line per suite (passed/FAILED, seconds) and a closing count. Exit 1 if
# any suite failed. A suite that runs longer than 30 s prints a line every 30 s, so a slow step is never silent.
#   TEST_SUITES="go py-oldest"  runs only those suites (names as in the table at the end)
set -uo pipefail
cd "$(dirname "$0")/.."
# What the Makefile exports, for a direct run of this script.
export GOFLAGS=${GOFLAGS:--tags=arrow_json_stdlib} CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
export GLOAD_PYTHON=${GLOAD_PYTHON:-$PWD/.venv/bin/python} GLOAD_PYTHON_OLDEST=${GLOAD_PYTHON_OLDEST:-$PWD/.venv-oldest/bin/python}
make=${MAKE:-make}

names=() results=() secs=()
# suite NAME CMD...: runs one suite with a heartbeat; records its result and goes on.
suite() {
	local name=$1 t0=$SECONDS rc=0
	shift
	if [[ -n ${TEST_SUITES:-} && " $TEST_SUITES " != *" $name "* ]]; then
		return 0
	fi
	echo
	echo "=== suite $name: start $(date -u +%T): $*"
	(while sleep 30; do echo "=== suite $name: still running ($((SECONDS - t0)) s)"; done) &
	local ticker=$!
	"$@" || rc=$?
	kill $ticker 2>/dev/null
	wait $ticker 2>/dev/null
	names+=("$name") secs+=($((SECONDS - t0)))
	if ((rc == 0)); then
		results+=(passed)
		echo "=== suite $name: passed in $((SECONDS - t0)) s"
	else
		results+=(FAILED)
		echo "=== suite $name: FAILED (exit $rc) after $((SECONDS - t0)) s"
	fi
}

# Set-up and build are not suites: without them nothing else can run.
SETUP_TEST=1 scripts/setup.sh || { echo "test: set-up failed" >&2; exit 1; }
$make --no-print-directory build || { echo "test: build failed" >&2; exit 1; }

suite go          go test -count=1 ./...
suite lint        $make --no-print-directory lint
suite go-race     $make --no-print-directory test-race
suite docs        $make --no-print-directory test-docs
suite fuzz-chat   $make --no-print-directory fuzz-chat FUZZTIME=${FUZZTIME:-60s}
suite wheel       $make --no-print-directory test-wheel
suite py-newest   $make --no-print-directory test-py-newest
suite py-oldest   $make --no-print-directory test-py-oldest
suite py-forksafe $make --no-print-directory test-py-forksafe
# The parity suite again with the Rust-core engine beside the Go one (libtokenizers.a: set-up builds it with
# SETUP_HF=1, which CI sets; about 5 minutes of cargo when cold).
go_hf() {
	if [[ ! -f build/libtokenizers/libtokenizers.a ]]; then
		echo "go-hf: skipped: no build/libtokenizers/libtokenizers.a (SETUP_HF=1 make test builds it with cargo)"
		[[ -z ${CI:-} ]]
		return
	fi
	go test -count=1 -tags hftokenizers,arrow_json_stdlib ./tokenize/...
}
suite go-hf go_hf

echo
echo "=== test summary ($(date -u +%T))"
failed=0
for i in "${!names[@]}"; do
	printf '  %-12s %-7s %5d s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}"
	[[ ${results[$i]} == passed ]] || failed=$((failed + 1))
done
echo "suites: $((${#names[@]} - failed)) passed, $failed failed"
((failed == 0))
