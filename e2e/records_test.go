//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// wdsSample is one sample a record reader produced.
type wdsSample struct {
	SHA256 string `json:"sha256"`
	Label  int    `json:"label"`
	Key    string `json:"key"`
	UUID   string `json:"uuid"`
	Name   string `json:"name"`
}

// readRecords runs wds_read.py and matches what it read to the source files.
func readRecords(t testing.TB, d *srcDataset, args ...string) (samples []wdsSample, items []readSample) {
	t.Helper()
	var out struct {
		Samples []wdsSample `json:"samples"`
	}
	runPython(t, &out, "wds_read.py", args...)
	for _, s := range out.Samples {
		items = append(items, readSample{d.byHash[s.SHA256], s.Label})
		if d.byHash[s.SHA256] != s.Name {
			t.Fatalf("%s: the JSON member names %s, the bytes are %s's", args[0], s.Name, d.byHash[s.SHA256])
		}
	}
	return out.Samples, items
}

// TestRecordViewWithReaders: an epoch's record view read by GNU tar (listed, and extracted
// into files equal to the sources), by DALI's fn.readers.webdataset with the index files
// and without, by two DALI readers at once each taking half the shards, and by the
// webdataset package through a DataLoader with two workers: each reads every sample of
// the epoch exactly once with its label, DALI in the epoch's order; DALI's own wds2idx
// writes the index files the mount shows; another epoch has another order.
func TestRecordViewWithReaders(t *testing.T) {
	d := sharedDataset(t)
	m := startMount(t, d.name, "--record-shard-size", "1MiB")
	epochDir := func(n int) string { return filepath.Join(m.dir, "all", "epoch-"+strconv.Itoa(n)+".wds") }
	tars := func(n int) (paths []string) {
		entries := testkit.Must(os.ReadDir(epochDir(n)))(t)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tar") {
				paths = append(paths, filepath.Join(epochDir(n), e.Name()))
			}
		}
		if len(entries) != 2*len(paths) || len(paths) < 2 {
			t.Fatalf("%s lists %d entries, %d tars: want a tar and an index per shard, several shards", epochDir(n), len(entries), len(paths))
		}
		return paths
	}
	// The epoch's order, by source path, from its file list.
	order := func(n int) []string {
		paths, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-"+strconv.Itoa(n)))
		for k, p := range paths {
			paths[k] = origName(p)
		}
		return paths
	}
	shards := tars(1)

	t.Run("GNUTar", func(t *testing.T) {
		var listed []string
		for _, tp := range shards {
			out, err := exec.Command("tar", "-tvf", tp).CombinedOutput()
			if err != nil {
				t.Fatalf("tar -tvf %s: %v\n%s", tp, err, out)
			}
			for line := range strings.Lines(string(out)) {
				fields := strings.Fields(line)
				if !strings.HasPrefix(fields[0], "-r--r--r--") {
					t.Fatalf("tar -tvf lists %q", line)
				}
				listed = append(listed, fields[len(fields)-1])
			}
			// DALI's own index writer, run on the tar, writes the index the mount shows.
			idx := filepath.Join(t.TempDir(), "wds2idx.idx")
			if out, err := exec.Command(filepath.Join(filepath.Dir(python(t)), "wds2idx"), tp, idx).CombinedOutput(); err != nil {
				t.Fatalf("wds2idx %s: %v\n%s", tp, err, out)
			}
			if mine := testkit.Must(os.ReadFile(strings.TrimSuffix(tp, ".tar") + ".idx"))(t); !bytes.Equal(testkit.Must(os.ReadFile(idx))(t), mine) {
				t.Fatalf("%s's index differs from what wds2idx writes for it", tp)
			}
		}
		if len(listed) != 3*len(d.sha) {
			t.Fatalf("tar lists %d members, want 3 for each of %d samples", len(listed), len(d.sha))
		}
		// Extracted, each image member is a source file's bytes, its .cls its class.
		out := t.TempDir()
		for _, tp := range shards {
			if b, err := exec.Command("tar", "-xf", tp, "-C", out).CombinedOutput(); err != nil {
				t.Fatalf("tar -xf %s: %v\n%s", tp, err, b)
			}
		}
		var got []string
		for _, e := range testkit.Must(os.ReadDir(out))(t) {
			key, ext, _ := strings.Cut(e.Name(), ".")
			if ext != "jpg" && ext != "png" {
				continue
			}
			data := testkit.Must(os.ReadFile(filepath.Join(out, e.Name())))(t)
			sum := sha256.Sum256(data)
			rel := d.byHash[hex.EncodeToString(sum[:])]
			cls := testkit.Must(os.ReadFile(filepath.Join(out, key+".cls")))(t)
			if rel == "" || string(cls) != strconv.Itoa(slices.Index(d.ix.Labels(), class(rel))) {
				t.Fatalf("extracted %s matches %q, label %q", e.Name(), rel, cls)
			}
			got = append(got, rel)
		}
		if !slices.Equal(got, order(1)) { // extracted names sort by position
			t.Fatalf("extracted %d images; they are not the epoch's samples in its order", len(got))
		}
	})

	t.Run("DALI", func(t *testing.T) {
		_, items := readRecords(t, d, append([]string{"dali", "--index"}, shards...)...)
		if got := expectEachOnce(t, d, "DALI with index_paths", items); !slices.Equal(got, order(1)) {
			t.Errorf("DALI with index_paths did not read in the epoch's order")
		}
		// Without index files DALI scans the tars; epoch 2's tars, another order.
		_, items = readRecords(t, d, append([]string{"dali"}, tars(2)...)...)
		got := expectEachOnce(t, d, "DALI scanning the tars", items)
		if !slices.Equal(got, order(2)) || slices.Equal(got, order(1)) {
			t.Errorf("DALI without index files: not epoch 2's order, or epoch 1's")
		}
	})

	t.Run("TwoDALIReaders", func(t *testing.T) {
		var mu sync.Mutex
		var all []readSample
		var wg sync.WaitGroup
		py := python(t)
		for k := range 2 {
			wg.Go(func() {
				var out struct {
					Samples []wdsSample `json:"samples"`
				}
				args := append([]string{"dali", "--index", "--num-shards", "2", "--shard-id", strconv.Itoa(k)}, tars(3)...)
				if err := pythonScript(py, &out, "wds_read.py", args...); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, s := range out.Samples {
					all = append(all, readSample{d.byHash[s.SHA256], s.Label})
				}
			})
		}
		wg.Wait()
		expectEachOnce(t, d, "two DALI readers of half the shards each", all)
	})

	t.Run("WebDatasetDataLoader", func(t *testing.T) {
		samples, items := readRecords(t, d, append([]string{"webdataset", "--workers", "2"}, tars(4)...)...)
		expectEachOnce(t, d, "webdataset through a DataLoader", items)
		for _, s := range samples {
			if _, err := strconv.Atoi(s.Key); err != nil || s.UUID == "" {
				t.Fatalf("webdataset sample key %q, uuid %q", s.Key, s.UUID)
			}
		}
	})
}

// TestRecordViewOwnConnection: with --records-at the record views are mounted there too,
// on a FUSE connection of their own: its tree holds only the splits' record views (and
// shard directories' record views). An
// epoch read there is followed, once its tars are closed, by the next epoch's tars written
// to local files; that epoch's opens are passed through to them (no READ reaches cassfs,
// where the kernel allows passthrough), every tar is byte for byte the main mount's, and
// DALI reads each sample once in the epoch's order. Both mounts go at SIGTERM.
func TestRecordViewOwnConnection(t *testing.T) {
	d := sharedDataset(t)
	rec := t.TempDir()
	m := startMount(t, d.name, "--record-shard-size", "1MiB", "--records-at", rec, "--metrics-addr", "127.0.0.1:0", "--order", "strict")
	url := metricsURL(t, m)
	metric := func(name string) float64 { v, _ := metricValue(scrape(t, url), name); return v }
	if got := testkit.Must(os.ReadDir(rec))(t); len(got) == 0 || slices.ContainsFunc(got, func(e os.DirEntry) bool { return e.Name() == "by-uuid" }) {
		t.Fatalf("%s lists %v: want the splits alone", rec, got)
	}
	for _, e := range testkit.Must(os.ReadDir(filepath.Join(rec, "all")))(t) {
		if !strings.HasSuffix(e.Name(), ".wds") {
			t.Fatalf("%s/all lists %s: want record views alone", rec, e.Name())
		}
	}
	for _, p := range []string{"all/epoch-1", "all/samples.csv", "all/shard-1-of-2/epoch-1"} {
		if _, err := os.Stat(filepath.Join(rec, p)); err == nil {
			t.Fatalf("%s/%s resolves: want record views alone", rec, p)
		}
	}
	if got := testkit.Must(os.ReadDir(filepath.Join(rec, "all", "shard-1-of-2", "epoch-0.wds")))(t); len(got) < 2 {
		t.Fatalf("%s/all/shard-1-of-2/epoch-0.wds lists %v: want its tars and indexes", rec, got)
	}
	tars := func(root string, n int) (paths []string) {
		dir := filepath.Join(root, "all", "epoch-"+strconv.Itoa(n)+".wds")
		for _, e := range testkit.Must(os.ReadDir(dir))(t) {
			if strings.HasSuffix(e.Name(), ".tar") {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
		return paths
	}
	// Epoch 0 read whole on the record view's mount, then let go: epoch 1's tars are
	// written (the quiet time is 50 ms).
	for _, tp := range tars(rec, 0) {
		testkit.Must(os.ReadFile(tp))(t)
	}
	written := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); metric("cassfs_record_tars_local_total") < float64(n); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v tars written to local files 20 s after an epoch was read, want %d; %s", metric("cassfs_record_tars_local_total"), n, m.log())
			}
		}
	}
	passthrough := passthroughKernel(t)
	noREADs := func(what string, read func()) {
		t.Helper()
		reads, passed := metric("cassfs_reads_total"), metric("cassfs_record_tar_opens_passed_through_total")
		read()
		if !passthrough {
			return
		}
		if got := metric("cassfs_reads_total") - reads; got != 0 {
			t.Errorf("%s: %v READs sent, want none (opens passed through)", what, got)
		}
		if metric("cassfs_record_tar_opens_passed_through_total") == passed {
			t.Errorf("%s: no open passed through", what)
		}
	}
	// Epoch 1's tars, each read whole from its local file, are the main mount's bytes.
	shards := tars(rec, 1)
	written(len(shards))
	var got [][]byte
	noREADs("epoch 1's tars read whole", func() {
		for _, tp := range shards {
			got = append(got, testkit.Must(os.ReadFile(tp))(t))
		}
	})
	for k, tp := range tars(m.dir, 1) {
		if !bytes.Equal(got[k], testkit.Must(os.ReadFile(tp))(t)) {
			t.Fatalf("%s differs from %s", shards[k], tp)
		}
	}
	// Epoch 2's tars (written once epoch 1's were closed) through DALI, which maps them.
	written(2 * len(shards))
	var items []readSample
	noREADs("DALI reading epoch 2", func() {
		_, items = readRecords(t, d, append([]string{"dali", "--index"}, tars(rec, 2)...)...)
	})
	order, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-2"))
	for k, p := range order {
		order[k] = origName(p)
	}
	if got := expectEachOnce(t, d, "DALI through the record view's mount", items); !slices.Equal(got, order) {
		t.Errorf("DALI through the record view's mount did not read in epoch 2's order")
	}
	// A process that maps epoch 3's tars and closes them, as DALI does, holds epoch 4's
	// writing off while it maps them; once it is gone, epoch 4's tars are written.
	written(3 * len(shards))
	// (Python's mmap keeps a descriptor of its own: libc's, as DALI's reader uses it.)
	holder := exec.Command("python3", append([]string{"-c", `import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    if libc.mmap(None, os.fstat(fd).st_size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0) in (None, ctypes.c_void_p(-1).value):
        sys.exit("mmap %s: errno %d" % (p, ctypes.get_errno()))
    os.close(fd)
print("mapped", flush=True)
time.sleep(2)`}, tars(rec, 3)...)...)
	out := testkit.Must(holder.StdoutPipe())(t)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 7)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "mapped\n" {
		t.Fatalf("the process mapping epoch 3's tars: %q, %v", line, err)
	}
	time.Sleep(time.Second)
	if got := metric("cassfs_record_tars_local_total"); got != float64(3*len(shards)) {
		t.Errorf("%v tars written while a process mapped epoch 3's, want %d (none of epoch 4's)", got, 3*len(shards))
	}
	holder.Wait()
	written(4 * len(shards))
	m.stop(t)
	if isMounted(rec) {
		t.Errorf("%s still mounted after cassfs exited", rec)
		syscall.Unmount(rec, syscall.MNT_DETACH)
	}
}
