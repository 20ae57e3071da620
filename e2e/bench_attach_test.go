//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// attachedRuns counts BenchmarkAttachedColdEpoch's runs in this process (-count).
var attachedRuns int

// BenchmarkAttachedColdEpoch compares, in one run, a cold epoch (new mount, page cache
// dropped) of a dataset attached to a table another tool wrote — the DALI plugin's
// data(id uuid PRIMARY KEY, label int, data blob) — with the same files ingested: 1,000
// ~110 KB images (CASSFS_BENCH_ATTACH_COUNT to change), 16 readers. Both read one blob per
// sample by its partition key; the attached one names the user's table and columns.
func BenchmarkAttachedColdEpoch(b *testing.B) {
	const readers = 16
	count := 1000
	if n, err := strconv.Atoi(os.Getenv("CASSFS_BENCH_ATTACH_COUNT")); err == nil && n > 0 {
		count = n
	}
	ingested, root := benchDataset(b, "benchingest", count, 23)

	ks, attached := newDataset(b, "benchsrc"), newDataset(b, "benchatt")
	s := cql(b, "")
	defer s.Close()
	for _, q := range []string{
		`CREATE KEYSPACE ` + ks + ` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`CREATE TABLE ` + ks + `.data_train (id uuid, label int, data blob, PRIMARY KEY ((id)))`,
	} {
		if err := s.Query(q).Exec(); err != nil {
			b.Fatal(err)
		}
	}
	classes, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	for label, c := range classes {
		files, err := os.ReadDir(filepath.Join(root, c.Name()))
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(root, c.Name(), f.Name()))
			if err != nil {
				b.Fatal(err)
			}
			id := gocql.UUID(uuid.New())
			if err := s.Query(`INSERT INTO `+ks+`.data_train (id, label, data) VALUES (?, ?, ?)`, id, label, data).Exec(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if r := cassfs(b, "dataset", "attach", attached, "--progress", "none", "--data-table", ks+".data_train"); r.code != 0 {
		b.Fatal(r)
	}

	cold := func(ds string) (filesPerSec, mbPerSec float64) {
		dropPageCache(b)
		m := startMount(b, ds)
		epoch := filepath.Join(m.dir, "all", "epoch-0")
		lines, _ := fileList(b, epoch)
		paths := make([]string, len(lines))
		for k, l := range lines {
			paths[k] = filepath.Join(epoch, l)
		}
		fps, mbps := readAll(b, paths, readers)
		m.stop(b)
		return fps, mbps
	}
	for n := range b.N {
		// Which is read first alternates between runs (-count counts them), so that neither
		// always meets the database as the other left it.
		var ing, ingMB, att, attMB float64
		if (n+attachedRuns)%2 == 0 {
			ing, ingMB = cold(ingested)
			att, attMB = cold(attached)
		} else {
			att, attMB = cold(attached)
			ing, ingMB = cold(ingested)
		}
		attachedRuns++
		b.ReportMetric(ing, "ingested-cold-files/s")
		b.ReportMetric(ingMB, "ingested-cold-MB/s")
		b.ReportMetric(att, "attached-cold-files/s")
		b.ReportMetric(attMB, "attached-cold-MB/s")
		b.ReportMetric(att/ing, "attached/ingested")
	}
}
