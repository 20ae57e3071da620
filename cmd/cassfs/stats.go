package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cassfs/cassfs/mount"
	"github.com/spf13/cobra"
)

func newStatsCmd() *cobra.Command {
	var (
		watch    time.Duration
		interval time.Duration
	)
	c := &cobra.Command{
		Use:   "stats MOUNTPOINT",
		Short: "Print a live summary of a running mount",
		Long: `stats asks the cassfs serving MOUNTPOINT (over its control socket, no network) for its
counters and prints what it served, its cache, fetch latencies, errors by kind, the
prefetch window of each split and its own memory. Rates are measured over --interval;
--watch repeats every so often until interrupted.`,
		Example: `  cassfs stats /mnt/tiles
  cassfs stats --watch 5s /mnt/tiles`,
		Args: exactlyOne("stats", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			if interval <= 0 || watch < 0 {
				return usageError{errors.New("--interval must be positive and --watch 0 or more")}
			}
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			for {
				if err := mount.PrintStats(c.Context(), c.OutOrStdout(), dir, interval); err != nil {
					return err
				}
				if watch == 0 {
					return nil
				}
				select {
				case <-c.Context().Done():
					return nil
				case <-time.After(watch):
				}
				fmt.Fprintln(c.OutOrStdout())
			}
		},
	}
	c.Flags().DurationVar(&watch, "watch", 0, "print again every so often until interrupted (0: once)")
	c.Flags().DurationVar(&interval, "interval", time.Second, "time over which rates are measured")
	return c
}
