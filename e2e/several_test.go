//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSeveralDatasets: one process serves two datasets at MOUNTPOINT/<dataset>/, each the
// tree a mount of it alone shows, through one database session (as many connections to the
// node as a mount of one dataset holds); cassfs stats reaches each; SIGTERM unmounts both
// and removes the directories the mount made.
func TestSeveralDatasets(t *testing.T) {
	d1 := sharedDataset(t)
	d2, err := generate(t, t.TempDir(), newDataset(t, "second"), hosts, "--count", "40", "--classes", "2", "--mean-size", "5000", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	one := startMount(t, d1.name)
	dir := t.TempDir()
	cmd := exec.Command(cassfsBin, "mount", "-d", d1.name+","+d2.name, dir)
	cmd.Env = append(os.Environ(), "CASSFS_HOSTS="+strings.Join(hosts, ","))
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
	for _, d := range []*srcDataset{d1, d2} {
		at := filepath.Join(dir, d.name)
		for deadline := time.Now().Add(60 * time.Second); !isMounted(at) || !serving(at); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not served after 60 s:\n%s", at, stderr.String())
			}
		}
		paths, _ := fileList(t, filepath.Join(at, "all", "epoch-0"))
		if len(paths) != len(d.sha) {
			t.Errorf("%s: epoch 0 lists %d files, the dataset has %d", d.name, len(paths), len(d.sha))
		}
		for _, p := range paths[:10] {
			data, err := os.ReadFile(filepath.Join(at, "all", "epoch-0", p))
			if err != nil || d.byHash[sha(data)] == "" {
				t.Errorf("%s: %s read %d bytes (%v), not a sample of the dataset", d.name, p, len(data), err)
			}
		}
		if r := cassfs(t, "stats", at); r.code != 0 || !strings.Contains(r.stdout, "fetches") {
			t.Errorf("cassfs stats %s: %s", at, r)
		}
	}
	if got, want := dbConnections(t, cmd.Process.Pid), dbConnections(t, one.cmd.Process.Pid); got != want || got == 0 {
		t.Errorf("the mount of two datasets holds %d connections to the database, one of one dataset %d: want one session's", got, want)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after SIGTERM:\n%s", stderr.String())
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("after unmounting, %s holds %v (%v): want the datasets' directories gone", dir, left, err)
	}
}

// dbConnections counts process pid's TCP connections to port 9042.
func dbConnections(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var sockets []string
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			sockets = append(sockets, strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"))
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && strings.HasSuffix(fields[2], ":2352") && slices.Contains(sockets, fields[9]) {
				n++
			}
		}
		f.Close()
	}
	return n
}
