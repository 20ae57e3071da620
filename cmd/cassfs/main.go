// Command cassfs stores image datasets in Apache Cassandra / ScyllaDB and serves them to
// deep-learning readers. Run "cassfs --help" for the subcommands.
//
// The command only parses flags and configuration files, wires the packages together and
// prints: it opens the store (one place: dbFlags.openStore) and hands it to package mount,
// which assembles the read path of a mount (mount.Open: views → prefetcher → cache →
// store) and serves it, its metrics and its control socket. What a mount shows is decided
// in view, what is fetched in prefetch, what is stored in store.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cassfs/cassfs/mount"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	// As a mount helper (/sbin/mount.fuse.cassfs, a symlink to cassfs), mount(8) and
	// /etc/fstab call it with "DATASET MOUNTPOINT -o options".
	if base := filepath.Base(os.Args[0]); base == "mount.fuse.cassfs" || base == "mount.cassfs" {
		args, err := mount.HelperArgs(os.Args[1:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", base, err)
			os.Exit(2)
		}
		root.SetArgs(args)
		commandArgs = args
	}
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cassfs:", err)
		os.Exit(exitCode(err))
	}
}
