package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/mount"
)

// daemonChild is set in the environment of the background child of cassfs mount --daemon.
// That command starts itself again as a child in a session of its own, with daemonChild
// set and its output going to the log file, and returns once the child serves the
// mountpoint (or fails, showing the end of its log). mount(8) and /etc/fstab reach cassfs
// through the mount helper: the binary called mount.fuse.cassfs (a symlink), which turns
// "SOURCE DIR -o opts" into such a mount.
const daemonChild = "CASSFS_DAEMON_CHILD"

// commandArgs are the arguments of the command being run: os.Args[1:], or what the mount
// helper made of them. The background child is started with them.
var commandArgs = os.Args[1:]

// daemonize starts the mount in the background and waits for it to serve dir.
func daemonize(dir, logFile string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer out.Close()
	start, _ := out.Seek(0, 2)
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(exe, commandArgs...)
	cmd.Env = append(os.Environ(), daemonChild+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the mount in the background: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if _, ok := mount.MountedAt(dir); ok && serving(dir) {
			fmt.Fprintf(os.Stderr, "cassfs: serving %s in the background (pid %d, log %s)\n", dir, cmd.Process.Pid, logFile)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the background mount exited (%v) before serving %s:\n%s", err, dir, logTail(logFile, start))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serving reports whether dir answers as a cassfs mount.
func serving(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "all"))
	return err == nil
}

// logTail is what was logged since offset start, at most its last 4 KiB.
func logTail(path string, start int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < start {
		return ""
	}
	b = b[start:]
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return strings.TrimRight(string(b), "\n")
}

// defaultLogFile is where a background mount logs unless --log-file says otherwise: beside
// its control socket.
func defaultLogFile(dir string) string {
	return strings.TrimSuffix(mount.ControlSocket(dir), ".sock") + ".log"
}
