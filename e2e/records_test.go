//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

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
