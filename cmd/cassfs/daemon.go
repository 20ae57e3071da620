package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/mount"
)

// # Running in the background
//
// cassfs mount --daemon starts the same command again as a child in a session of its own,
// with the environment variable daemonChild set, its output going to the log file, and
// returns once the child serves the mountpoint (or fails, showing the end of its log).
// mount(8) and /etc/fstab reach cassfs through the mount helper: the binary called
// mount.fuse.cassfs (a symlink), which turns "SOURCE DIR -o opts" into such a mount.

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

// helperArgs turns the arguments mount(8) gives a mount helper — SOURCE DIR [-s] [-f] [-n]
// [-v] [-o OPTIONS] — into those of cassfs mount --daemon. SOURCE is the dataset; each
// option key=value becomes --key=value (underscores as dashes) and each bare key --key,
// except the generic mount options, which mean nothing to cassfs (it is always read-only).
func helperArgs(args []string) ([]string, error) {
	var pos, opts []string
	for k := 0; k < len(args); k++ {
		switch a := args[k]; {
		case a == "-o":
			if k+1 == len(args) {
				return nil, errors.New("-o without options")
			}
			opts = append(opts, strings.Split(args[k+1], ",")...)
			k++
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, strings.Split(a[2:], ",")...)
		case a == "-s" || a == "-f" || a == "-n" || a == "-v":
			// sloppy, fake, no mtab, verbose: nothing to do
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("unknown mount option %s", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("want DATASET MOUNTPOINT [-o options], got %q", args)
	}
	out := []string{"mount", "--daemon", "--dataset", strings.TrimPrefix(pos[0], "cassfs#")}
	for _, o := range opts {
		key, value, hasValue := strings.Cut(strings.TrimSpace(o), "=")
		if key == "" || genericMountOption(key) {
			continue
		}
		flag := "--" + strings.ReplaceAll(key, "_", "-")
		if hasValue {
			flag += "=" + value
		}
		out = append(out, flag)
	}
	return append(out, pos[1]), nil
}

func genericMountOption(key string) bool {
	switch key {
	case "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "nofail", "_netdev",
		"ro", "rw", "exec", "noexec", "suid", "nosuid", "dev", "nodev", "sync", "async",
		"atime", "noatime", "relatime", "strictatime", "nodiratime", "comment":
		return true
	}
	return strings.HasPrefix(key, "x-")
}
