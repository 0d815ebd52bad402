package loader_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"

	"github.com/gload/gload/internal/testuser"
	"github.com/gload/gload/loader"
)

// TestMain runs the package's tests, or, with GLOAD_TEST_SERVE set, serves as
// the separate server process of TestHostileStreamsBounded (so that its
// memory is measured apart from the clients').
func TestMain(m *testing.M) {
	testuser.Main() // the second user's side of the cross-user tests
	if os.Getenv("GLOAD_TEST_SERVE") != "" {
		os.Exit(serveHelper())
	}
	code := m.Run()
	testuser.Done()
	os.Exit(code)
}

// serveHelper serves $GLOAD_TEST_DATASET on $GLOAD_TEST_SERVE (an address)
// with $GLOAD_TEST_MAX_BUFFER_BYTES (0: the default) until SIGTERM.
func serveHelper() int {
	budget, _ := strconv.ParseInt(os.Getenv("GLOAD_TEST_MAX_BUFFER_BYTES"), 10, 64)
	srv, err := loader.NewServer(loader.Config{
		Datasets: map[string]string{"d": os.Getenv("GLOAD_TEST_DATASET")}, MaxBufferBytes: budget, NoGPUWatch: true,
		NoWriteIndex: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lis, err := loader.Listen(os.Getenv("GLOAD_TEST_SERVE"), loader.ListenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println("serving")
	if err := srv.Serve(ctx, lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
