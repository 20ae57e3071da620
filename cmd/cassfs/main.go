// Command cassfs stores image datasets in Apache Cassandra / ScyllaDB and serves them to
// deep-learning readers. Run "cassfs --help" for the subcommands.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cassfs/cassfs/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store.SetLogger(slog.Default()) // mount sets its own logger
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cassfs:", err)
		os.Exit(exitCode(err))
	}
}
