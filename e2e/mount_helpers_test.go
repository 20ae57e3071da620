//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/synth"
)

// pythonBin is the Python with DALI and torchvision (e2e/python-env.sh), set up on first use.
var (
	pythonOnce sync.Once
	pythonBin  string
	pythonErr  error
)

func python(t testing.TB) string {
	t.Helper()
	pythonOnce.Do(func() {
		cmd := exec.Command("./python-env.sh")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		pythonBin, pythonErr = strings.TrimSpace(string(out)), err
	})
	if pythonErr != nil {
		t.Fatalf("python-env.sh: %v", pythonErr)
	}
	return pythonBin
}

// runPython runs a reader script and decodes its JSON output into v.
func runPython(t testing.TB, v any, script string, args ...string) {
	t.Helper()
	if err := pythonScript(python(t), v, script, args...); err != nil {
		t.Fatal(err)
	}
}

// pythonScript runs a reader script with py and decodes its JSON output into v; it may run
// on any goroutine.
func pythonScript(py string, v any, script string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("readers", script)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// The end of a Python's standard error holds the traceback and its cause.
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		return fmt.Errorf("%s %v: %v; its standard error (last %d of %d lines):\n%s", script, args, err, min(logTail, len(lines)), len(lines), strings.Join(lines[max(0, len(lines)-logTail):], "\n"))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s output: %v\n%s", script, err, out)
	}
	return nil
}

// srcDataset is one generated and ingested dataset shared by the filesystem tests (dropped
// by TestMain).
type srcDataset struct {
	name   string
	root   string            // the generated ImageFolder tree
	sha    map[string]string // "<class>/<file>" → sha256 of the file
	byHash map[string]string // sha256 → "<class>/<file>"
	ix     *index.Index
}

var (
	sharedOnce sync.Once
	shared     *srcDataset
	sharedErr  error
	sharedDir  string
)

const sharedCount = 300

func sharedDataset(t testing.TB) *srcDataset {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = makeShared(t) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func makeShared(t testing.TB) (*srcDataset, error) {
	dir, err := os.MkdirTemp("", "cassfs-e2e-data-")
	if err != nil {
		return nil, err
	}
	sharedDir = dir
	return generate(t, dir, "fs_shared", hosts, "--count", "300", "--classes", "4", "--seed", "3")
}

// generate runs cassfs gen into dir with genArgs and ingests the result with its metadata
// into dataset name (dropped first) on the cluster at hosts (replication factor 3 when
// there are three hosts or more).
func generate(t testing.TB, dir, name string, hosts []string, genArgs ...string) (*srcDataset, error) {
	if r := cassfs(t, append([]string{"gen", "--out", dir, "--progress", "none"}, genArgs...)...); r.code != 0 {
		return nil, errors.New("gen: " + r.String())
	}
	d := &srcDataset{name: name, root: filepath.Join(dir, "images")}
	dropKeyspaceOn(hosts, d.name)
	rf := "1"
	if len(hosts) >= 3 {
		rf = "3"
	}
	if r := cassfs(t, "ingest", "-d", d.name, "--hosts", strings.Join(hosts, ","), "--replication", rf, "--progress", "none",
		"--csv", filepath.Join(dir, "metadata.csv"), d.root); r.code != 0 {
		return nil, errors.New("ingest: " + r.String())
	}
	var err error
	if d.sha, d.byHash, err = hashTree(d.root); err != nil {
		return nil, err
	}
	st, err := cassandra.Open(context.Background(), cassandra.Config{Hosts: hosts, Dataset: d.name, Timeout: 20 * time.Second})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if d.ix, err = index.Load(context.Background(), st); err != nil {
		return nil, err
	}
	return d, nil
}

// class is the class directory of a "<class>/<file>" path.
func class(rel string) string { return rel[:strings.IndexByte(rel, '/')] }

// mounted is a cassfs mount process.
type mounted struct {
	dir    string
	cmd    *exec.Cmd
	stderr *syncBuf
	done   chan error
	exited bool // its exit was received from done
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logTail is how many of the mount's last log lines a failure message shows.
const logTail = 40

// log is the mount's log for a failure message, which it follows: the message must come
// first and stay in sight, so a long log is cut to its last logTail lines (where a
// failure's cause is) and kept whole in a file the message names.
func (m *mounted) log() string {
	full := m.stderr.String()
	lines := strings.Split(strings.TrimRight(full, "\n"), "\n")
	if len(lines) <= logTail {
		return "the mount's log:\n" + full
	}
	where := "not kept"
	if f, err := os.CreateTemp("", "cassfs-mount-log-*.txt"); err == nil {
		if _, err := f.WriteString(full); err == nil {
			where = f.Name()
		}
		f.Close()
	}
	return fmt.Sprintf("the mount's log, its last %d of %d lines (all of it in %s):\n%s", logTail, len(lines), where, strings.Join(lines[len(lines)-logTail:], "\n"))
}

// waitFor reports whether sub appears within 10 s. A process's stderr reaches the buffer
// through a pipe and a copying goroutine, so a line the process wrote before answering a
// request may arrive after the answer.
func (s *syncBuf) waitFor(sub string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.String(), sub) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// startMount runs "cassfs mount" on a new directory and waits until the tree is there. The
// test's cleanup stops it with SIGTERM and requires a clean exit with nothing left mounted.
func startMount(t testing.TB, dataset string, args ...string) *mounted {
	t.Helper()
	return startMountAt(t, t.TempDir(), dataset, args...)
}

func startMountAt(t testing.TB, dir, dataset string, args ...string) *mounted {
	t.Helper()
	return startMountWith(t, dir, dataset, nil, args...)
}

// startMountWith is startMountAt with the command changed by wrap, if set, before it starts.
func startMountWith(t testing.TB, dir, dataset string, wrap func(*exec.Cmd), args ...string) *mounted {
	t.Helper()
	m := &mounted{dir: dir, stderr: &syncBuf{}, done: make(chan error, 1)}
	m.cmd = exec.Command(cassfsBin, append([]string{"mount", "-d", dataset}, append(args, dir)...)...)
	m.cmd.Env = append(os.Environ(), "CASSFS_HOSTS="+strings.Join(hosts, ","))
	m.cmd.Stderr = m.stderr
	if wrap != nil {
		wrap(m.cmd)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	// Serving, not just mounted: a stale mount left by a killed cassfs is mounted too.
	for !isMounted(dir) || !serving(dir) {
		select {
		case err := <-m.done:
			t.Fatalf("cassfs mount exited before mounting: %v; %s", err, m.log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.cmd.Process.Kill()
			t.Fatalf("cassfs mount did not mount within 60s; %s", m.log())
		}
	}
	t.Cleanup(func() { m.stop(t) })
	return m
}

// runAs is startMountWith's wrap that runs the cassfs binary at bin (an earlier build,
// say) instead of the one built for the tests; nil for "".
func runAs(bin string) func(*exec.Cmd) {
	if bin == "" {
		return nil
	}
	return func(c *exec.Cmd) { c.Path, c.Args[0] = bin, bin }
}

// stop sends SIGTERM and requires a clean exit and no mount left behind.
func (m *mounted) stop(t testing.TB) {
	t.Helper()
	if m.exited || m.cmd.ProcessState != nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("cassfs mount exited with %v after SIGTERM; %s", err, m.log())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("cassfs mount did not exit within 30s of SIGTERM; its goroutines in cassfs's code then:\n%s\n%s", m.goroutinesAtQuit(), m.log())
	}
	if isMounted(m.dir) {
		t.Errorf("%s is still mounted after cassfs exited", m.dir)
		syscall.Unmount(m.dir, syscall.MNT_DETACH)
	}
}

// unmountOutside unmounts m from outside (umount), trying again while the mount is busy
// for up to within, and requires cassfs to exit cleanly then.
func (m *mounted) unmountOutside(t testing.TB, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		out, err := exec.Command("umount", m.dir).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("umount %s, %v on: %v\n%s", m.dir, within, err, out)
		}
	}
	select {
	case err := <-m.done:
		m.exited = true
		if err != nil {
			t.Errorf("cassfs mount exited with %v after it was unmounted from outside; %s", err, m.log())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("cassfs mount did not exit within 30s of being unmounted from outside; %s", m.log())
	}
}

// goroutinesAtQuit has a mount that does not exit print its goroutines (SIGQUIT: the Go
// runtime prints them and exits) and returns those in cassfs's own code, at most 150
// lines: what held its exit up.
func (m *mounted) goroutinesAtQuit() string {
	m.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
	var ours []string
	for _, g := range strings.Split(m.stderr.String(), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "github.com/cassfs/cassfs/") {
			ours = append(ours, g)
		}
	}
	lines := strings.Split(strings.Join(ours, "\n\n"), "\n")
	return strings.Join(lines[:min(len(lines), 150)], "\n")
}

func serving(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "all"))
	return err == nil
}

// isMounted reports whether a FUSE filesystem of cassfs is mounted at dir.
func isMounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir && strings.Contains(sc.Text(), "fuse.cassfs") {
			return true
		}
	}
	return false
}

// fileList reads an epoch's file_list.txt as (path, label) lines.
func fileList(t testing.TB, root string) (paths []string, labels []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		sp := strings.LastIndexByte(line, ' ')
		paths = append(paths, line[:sp])
		labels = append(labels, line[sp+1:])
	}
	return paths, labels
}

// origName maps "<class>/<pos>_<file>" in a mount to the source path "<class>/<file>".
func origName(p string) string {
	c, name, _ := strings.Cut(p, "/")
	return c + "/" + name[strings.IndexByte(name, '_')+1:]
}

// readSample is one item a reader produced: the source path it matched and the label it gave.
type readSample struct {
	rel   string // "" when the content matched no source file
	label int
}

// expectEachOnce checks that a reader's items are every sample of d exactly once, each with
// its class index as label, and returns the source paths in read order.
func expectEachOnce(t testing.TB, d *srcDataset, reader string, items []readSample) []string {
	t.Helper()
	seen := map[string]bool{}
	var order []string
	for _, it := range items {
		if it.rel == "" || seen[it.rel] {
			t.Fatalf("%s read unknown or repeated content (%q)", reader, it.rel)
		}
		seen[it.rel] = true
		order = append(order, it.rel)
		if want := slices.Index(d.ix.Labels(), class(it.rel)); it.label != want {
			t.Errorf("%s: %s with label %d, want %d", reader, it.rel, it.label, want)
		}
	}
	if len(seen) != len(d.sha) {
		t.Errorf("%s read %d samples, want %d", reader, len(seen), len(d.sha))
	}
	return order
}

// readDALI runs dali_read.py with args and matches what it read to the source files.
func readDALI(t testing.TB, d *srcDataset, args ...string) (daliOut, []readSample) {
	t.Helper()
	var out daliOut
	runPython(t, &out, "dali_read.py", args...)
	var items []readSample
	for _, s := range out.Samples {
		items = append(items, readSample{d.byHash[s.SHA256], s.Label})
	}
	return out, items
}

// readTorchvision runs torch_read.py on an epoch directory and matches the decoded pixels
// to the source images (decoded by the same PIL).
func readTorchvision(t testing.TB, d *srcDataset, dir string, extra ...string) (classes []string, items []readSample) {
	t.Helper()
	var ref map[string]string // source path → pixel hash
	runPython(t, &ref, "pixel_hashes.py", d.root)
	byPixels := map[string]string{}
	for rel, h := range ref {
		byPixels[h] = rel
	}
	var out struct {
		Classes []string `json:"classes"`
		Samples []struct {
			Pixels string `json:"pixels"`
			Label  int    `json:"label"`
		} `json:"samples"`
	}
	runPython(t, &out, "torch_read.py", append([]string{dir, "--workers", "2"}, extra...)...)
	for _, s := range out.Samples {
		items = append(items, readSample{byPixels[s.Pixels], s.Label})
	}
	return out.Classes, items
}

// benchDataset generates count ~110 KB images (10% PNG) and ingests them into a new
// dataset; it returns the dataset and the image root.
func benchDataset(b *testing.B, prefix string, count int, seed uint64) (ds, root string) {
	b.Helper()
	dir := b.TempDir()
	if err := synth.Generate(context.Background(), synth.Options{Out: dir, Count: count, Classes: 4, MeanSize: 110_000, PNGFraction: 0.1, Seed: seed}); err != nil {
		b.Fatal(err)
	}
	root, _ = synth.Layout(dir)
	ds = newDataset(b, prefix)
	if r := cassfs(b, "ingest", "-d", ds, "--progress", "none", root); r.code != 0 {
		b.Fatal(r)
	}
	return ds, root
}

// treeBytes is the size of the files under root.
func treeBytes(t testing.TB, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			fi, ierr := e.Info()
			if ierr == nil {
				total += fi.Size()
			}
			return ierr
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// parallel runs fn(k) for k in [0, n) on p goroutines, each taking the next k, and stops
// a goroutine at its first error (reported on t).
func parallel(t testing.TB, p, n int, fn func(k int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < n; k = int(next.Add(1)) - 1 {
				if err := fn(k); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// hashTree is the SHA-256 (hex) of every file under root by its path relative to root, and
// the inverse.
func hashTree(root string) (sha, byHash map[string]string, err error) {
	sha, byHash = map[string]string{}, map[string]string{}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		sha[rel] = hex.EncodeToString(sum[:])
		byHash[sha[rel]] = rel
		return nil
	})
	return sha, byHash, err
}
