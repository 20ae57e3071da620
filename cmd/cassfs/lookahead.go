package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

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

// lookaheadHelper is a running helper process.
type lookaheadHelper struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	done    chan error
	stopped bool
}

// startLookahead starts the helper on the mount at dir and hands it to fsys. The helper
// dies with the daemon (PR_SET_PDEATHSIG), and its lookups then fail once the kernel has
// aborted the connection.
func startLookahead(fsys *cfs.FS, dir string, opts cfs.LookaheadOptions, log *slog.Logger) (*lookaheadHelper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	h := &lookaheadHelper{cmd: exec.Command(exe, "lookahead-helper", dir), done: make(chan error, 1)}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	h.cmd.Stderr = os.Stderr
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the lookahead helper: %w", err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	fsys.StartLookahead(h.in, out, opts)
	log.Debug("names looked up ahead of the readers", "distance", opts.Distance, "helper", h.cmd.Process.Pid)
	return h, nil
}

// stop ends the helper: its input closes, so it finishes what it was asked and exits.
func (h *lookaheadHelper) stop(log *slog.Logger) {
	if h.stopped {
		return
	}
	h.stopped = true
	h.in.Close()
	select {
	case err := <-h.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			log.Warn("lookahead helper", "err", err)
		}
	case <-time.After(5 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
}
