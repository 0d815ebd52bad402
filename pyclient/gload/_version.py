# The client's version; equal to internal/version/VERSION, the Go side's (a Go test checks).
__version__ = "0.1.0"
