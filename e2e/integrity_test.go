//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// TestIntegrity: a blob rewritten behind cassfs's back is refused with EIO and a logged
// checksum mismatch, never served; a sample listed but missing from the blob table is an
// EIO whose log line names its uuid. Both are counted by kind in the metrics.
func TestIntegrity(t *testing.T) {
	d, err := generate(t, t.TempDir(), newDataset(t, "integrity"), hosts, "--count", "12", "--classes", "2", "--mean-size", "5000")
	if err != nil {
		t.Fatal(err)
	}
	corrupt, missing := d.ix.ID(3), d.ix.ID(7)
	s := cql(t, d.name)
	defer s.Close()
	var data []byte
	if err := s.Query(`SELECT data FROM blobs WHERE id = ?`, gocql.UUID(corrupt)).Scan(&data); err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x5a // same size and label, other bytes
	if err := s.Query(`UPDATE blobs SET data = ? WHERE id = ?`, data, gocql.UUID(corrupt)).Exec(); err != nil {
		t.Fatal(err)
	}
	if err := s.Query(`DELETE FROM blobs WHERE id = ?`, gocql.UUID(missing)).Exec(); err != nil {
		t.Fatal(err)
	}

	m := startMount(t, d.name, "--metrics-addr", "127.0.0.1:0", "--timeout", "3s")
	read := func(i uint32) error {
		_, err := os.ReadFile(filepath.Join(m.dir, "by-uuid", d.ix.ID(i).String()+path.Ext(d.ix.Name(i))))
		return err
	}
	if err := read(3); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of the rewritten blob: %v, want EIO", err)
	}
	if err := read(7); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of the missing blob: %v, want EIO", err)
	}
	if err := read(5); err != nil {
		t.Errorf("read of an intact sample: %v", err)
	}
	for _, want := range []string{corrupt.String(), "checksum differs", missing.String(), "not found"} {
		if !m.stderr.waitFor(want) {
			t.Errorf("the log does not mention %q; %s", want, m.log())
		}
	}
	body := scrape(t, metricsURL(t, m))
	for kind, want := range map[string]float64{"corrupt": 1, "missing": 1, "timeout": 0} {
		v, ok := metricValue(body, `cassfs_fetch_errors_total\{kind="`+kind+`"\}`)
		// The kernel may retry a failed read; a retry within a second is answered from the
		// failure's memory, so each sample's fetch fails once.
		if !ok || v != want {
			t.Errorf("cassfs_fetch_errors_total{kind=%q} = %v, want %v", kind, v, want)
		}
	}
}

// TestRetainedBlobsStayIntact: blobs the Cassandra backend hands over without copying
// (Get with no buffer, and every blob of a block) keep their bytes while many more reads
// go on over the same connections: the driver does not reuse their frame buffers.
func TestRetainedBlobsStayIntact(t *testing.T) {
	d := sharedDataset(t)
	st := openStore(t, d.name, false)
	ctx := context.Background()
	var samples []store.Sample
	if err := st.Scan(ctx, func(s store.Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	kept := make([][]byte, min(100, len(samples)))
	for k := range kept {
		b, err := st.Get(ctx, samples[k].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		kept[k] = b.Data
	}
	// Then blocks of 16 (the first one's blobs kept from here on).
	block := func(from int, keep bool) {
		ids := make([]uuid.UUID, 16)
		for j := range ids {
			ids[j] = samples[(from+j)%len(samples)].ID
		}
		store.GetBlock(ctx, st, ids, func(j int, b store.Blob, err error) {
			if err != nil {
				t.Error(err)
			} else if keep {
				kept[from+j] = b.Data
			}
		})
	}
	kept = append(kept, make([][]byte, 16)...)
	block(len(kept)-16, true)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := g; k < 3*len(samples); k += 16 {
				if k%5 == 0 {
					block(k, false)
					continue
				}
				if _, err := st.Get(ctx, samples[k%len(samples)].ID, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k, data := range kept {
		if store.Checksum(data) != samples[k].Checksum {
			t.Fatalf("blob %s changed after it was returned", samples[k].ID)
		}
	}
}
