#!/usr/bin/env bash
# Regenerates the Go code (proto/gloadpb) and the Python stubs (pyclient/gload/_proto) from gload.proto.
# Needs: protoc (Debian protobuf-compiler 3.21), protoc-gen-go and protoc-gen-go-grpc (go install), and
# grpc_python_plugin (Debian protobuf-compiler-grpc). Generated files are committed; never edit them by hand.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:$(go env GOPATH)/bin"
mkdir -p gloadpb ../pyclient/gload/_proto
protoc --go_out=gloadpb --go_opt=paths=source_relative \
	--go-grpc_out=gloadpb --go-grpc_opt=paths=source_relative gload.proto
if command -v grpc_python_plugin >/dev/null; then
	protoc --python_out=../pyclient/gload/_proto --grpc_out=../pyclient/gload/_proto \
		--plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" gload.proto
	# grpc_python_plugin writes an absolute import; make it relative to the package.
	sed -i 's/^import gload_pb2 as gload__pb2$/from . import gload_pb2 as gload__pb2/' ../pyclient/gload/_proto/gload_pb2_grpc.py
	# protoc names the module after the file (gload_pb2); the classes must carry their importable name so that
	# pickle (spawn/forkserver DataLoader workers) finds them.
	sed -i "s/^_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'gload_pb2', globals())$/_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'gload._proto.gload_pb2', globals())/" \
		../pyclient/gload/_proto/gload_pb2.py
	grep -q "'gload._proto.gload_pb2'" ../pyclient/gload/_proto/gload_pb2.py || { echo "gen.sh: module name not fixed" >&2; exit 1; }
fi
