"""Stubs generated from proto/gload.proto by proto/gen.sh (protoc + grpc_python_plugin). Never edit them by hand."""
