# gload — build, demo and tests. The two commands a new machine needs:
#   make demo   set up, build, and run the main job on the bundled example
#   make test   set up and run every test (what .ci/run runs)

GO        ?= go
PYTHON    ?= .venv/bin/python
BIN       := bin/gload
# The version every surface reports: internal/version/VERSION plus the commit (gload --version).
LDFLAGS   := -X github.com/gload/gload/internal/version.commit=$(shell git describe --always --dirty 2>/dev/null)
export CGO_CFLAGS := -Wno-deprecated-declarations
# arrow-go's JSON through encoding/json instead of goccy/go-json: a fifth less to compile on a cold build.
TAGS      := arrow_json_stdlib
export GOFLAGS := $(filter-out -tags=$(TAGS),$(GOFLAGS)) -tags=$(TAGS)
export GLOAD_PYTHON := $(abspath $(PYTHON))
# The oldest supported datasets/pyarrow (loader/dataset's Hugging Face check runs with both).
export GLOAD_PYTHON_OLDEST := $(abspath .venv-oldest/bin/python)

comma     := ,

.PHONY: all setup build build-hf demo test test-go test-race test-hf test-py test-py-newest test-py-oldest test-py-forksafe test-docs test-wheel wheel lint bench fuzz-chat clean

all: build

setup:
	scripts/setup.sh

build:
	@scripts/progress.sh "go build $(BIN)" $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gload

# The Rust-core engine (--engine hf) needs libtokenizers.a: scripts/build-libtokenizers.sh builds it.
build-hf:
	scripts/build-libtokenizers.sh
	$(GO) build -ldflags "$(LDFLAGS)" -tags hftokenizers,$(TAGS) -o bin/gload-hf ./cmd/gload

# Set-up (mostly downloads) and the Go build (CPU) run side by side: on a cold machine that hides most of the build.
demo:
	@$(MAKE) --no-print-directory -j2 setup build
	scripts/demo.sh

lint: setup
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every suite, going on after a failure, with a summary at the end (scripts/test.sh says how; TEST_SUITES picks some).
test:
	scripts/test.sh

# The concurrent tokenize pipeline under the race detector (its stress test runs GOMAXPROCS above the core count
# with background CPU load), the parallel decoder of framed .zst/.gz inputs and the reader using it (likewise stressed;
# about 45 s and 25 s on 2 cores), the object-storage shard cache with the streams that use it, and
# the lazy plans read by several streams at once, and the whole service package with its Go client (about 110 s
# here on 2 busy cores).
RACE_RUNS := "./tokenize/pipeline/... ./internal/framedio/ ./tokenize/corpus/" \
	"-run Shared|WordCache ./tokenize/model/" \
	"./loader/shardcache/ ./loader/objstore/... ./internal/dirlock/ ./internal/safename/ ./internal/privdir/" \
	"-run ObjectStorage|SlowStorage|Lazy|TailHasher|Writer|IndexLengths ./loader/dataset/" \
	"-short -run Concurrent|Cancel ./bucket/" \
	"./loader/ ./loader/client/ ./loader/gpuwatch/ ./loader/access/"
# Each group runs even when an earlier one failed; the target fails at the end if any did.
test-race:
	@rc=0; for a in $(RACE_RUNS); do echo "test-race: go test -race $$a ($$(date -u +%T))"; \
		$(GO) test -race -count=1 $$a || rc=1; done; echo "test-race: done $$(date -u +%T)"; exit $$rc

# The Python client (pyclient/) against a real gload serve, in the newest (.venv) and the oldest supported
# (.venv-oldest: grpcio 1.51, protobuf 4.21, numpy 1.24, Debian's CPU torch 1.13) stacks. Skips are listed with their
# reasons (-rs). torch tests skip where torch is absent (.venv: PyPI's torch 2.x wheels pull ~3 GB of CUDA libraries);
# in CI (CI=true) the torch and DDP groups must run in .venv-oldest: a whole group skipping fails the run.
# A test that hangs fails after 300 s (pytest-timeout, with every thread's stack); a suite that hangs anyway (a
# wedged fixture) is ended after 30 min. The third run: forked DataLoader workers (torch's default start method) of
# a parent that used gRPC, with the first grpcio that works there (.venv-forksafe, Debian's torch).
PYTEST    := -m pytest -q -rs -p no:cacheprovider --timeout=300 tests
SUITE_CAP := timeout --kill-after=30 1800
test-py: test-py-newest test-py-oldest test-py-forksafe

test-py-newest: build
	cd pyclient && GLOAD_BIN=$(abspath $(BIN)) GLOAD_REQUIRE_GROUPS=$(if $(CI),ray_tokenize) $(SUITE_CAP) $(abspath $(PYTHON)) $(PYTEST)

test-py-oldest: build
	cd pyclient && GLOAD_BIN=$(abspath $(BIN)) GLOAD_REQUIRE_GROUPS=$(if $(CI),torch$(comma)ddp) $(SUITE_CAP) $(abspath .venv-oldest/bin/python) $(PYTEST)

test-py-forksafe: build
	cd pyclient && GLOAD_BIN=$(abspath $(BIN)) GLOAD_REQUIRE_GROUPS=$(if $(CI),torch$(comma)process_safety) $(SUITE_CAP) $(abspath .venv-forksafe/bin/python) \
		$(PYTEST:tests=tests/test_process_safety.py tests/test_torch.py)

# The runnable blocks of README and docs/ (marked as such), run in order against bin/gload and .venv.
test-docs: build
	$(PYTHON) scripts/docs-test.py --python $(abspath $(PYTHON))

# The release wheel (dist/gload-<version>-py3-none-manylinux_X_Y_<arch>.whl): the Python package, the native copier
# and bin/gload, tagged with the glibc the binaries need (scripts/wheel/build.py). Its build tools live in
# .venv-wheel (.ci/requirements-wheel.txt; made once, about 10 s).
WHEEL_VENV := .venv-wheel
$(WHEEL_VENV)/.ok: .ci/requirements-wheel.txt
	python3 -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install --quiet --disable-pip-version-check -r .ci/requirements-wheel.txt
	touch $@

wheel: build $(WHEEL_VENV)/.ok
	scripts/build-copier.sh
	$(WHEEL_VENV)/bin/python scripts/wheel/build.py

# The wheel installed into a fresh venv in an empty directory, PATH without Go or cc (scripts/wheel/test_wheel.py).
test-wheel: wheel
	$(WHEEL_VENV)/bin/python -m pytest -q -rs -s -p no:cacheprovider --timeout=300 scripts/wheel/test_wheel.py

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./tokenize/...

# Hostile chat templates (tokenize/chat FuzzTemplate, corpus in tokenize/chat/testdata) for FUZZTIME under a memory
# limit: ulimit -v bounds each fuzz worker's address space and GOMEMLIMIT its heap, so an out-of-memory fails the run
# instead of the machine; -timeout ends a hang. A crash, OOM or hang fails; about FUZZTIME plus 20 s of compiling.
FUZZTIME ?= 60s
fuzz-chat:
	ulimit -v 8000000 && GOMEMLIMIT=1GiB $(GO) test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME) -parallel 2 -timeout 10m ./tokenize/chat/

clean:
	rm -rf bin build
