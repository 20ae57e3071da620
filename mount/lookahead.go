package mount

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
)

// lookaheadHelper is a running helper process looking names up ahead of the readers
// (fs/lookahead.go): another process than the daemon, since a thread of the daemon
// waiting on its own mount could not be killed.
type lookaheadHelper struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	done    chan error
	stopped bool
}

// startLookahead starts the helper (command, then dir) on the mount at dir and hands it to
// fsys. The helper dies with the daemon (PR_SET_PDEATHSIG), and its lookups then fail once
// the kernel has aborted the connection.
func startLookahead(fsys *cfs.FS, command []string, dir string, opts cfs.LookaheadOptions, log *slog.Logger) (*lookaheadHelper, error) {
	h := &lookaheadHelper{cmd: exec.Command(command[0], append(command[1:len(command):len(command)], dir)...), done: make(chan error, 1)}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	h.cmd.Stderr = os.Stderr
	var err error
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
