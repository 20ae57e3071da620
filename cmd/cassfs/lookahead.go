package main

import (
	"os"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/spf13/cobra"
)

// lookaheadCmd is the helper process a mount starts to look names up ahead of the
// readers (fs/lookahead.go): it must be another process than the daemon, since a thread of
// the daemon waiting on its own mount could not be killed. Hidden: nobody runs it by hand.
func newLookaheadCmd() *cobra.Command {
	var workers int
	c := &cobra.Command{
		Use:    "lookahead-helper MOUNTPOINT",
		Short:  "look names up on a cassfs mount as its daemon asks (started by cassfs mount)",
		Hidden: true,
		Args:   exactlyOne("lookahead-helper", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			return cfs.ServeLookahead(args[0], os.Stdin, os.Stdout, workers)
		},
	}
	c.Flags().IntVar(&workers, "workers", 4, "lookups at once")
	return c
}
