// Command gload pre-tokenizes corpora into memory-mapped Arrow datasets and serves batches to training loops.
// This package holds flags and wiring only; the work lives in tokenize, loader and bench.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
