//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
)

// BenchmarkMountStart: how long a mount of a 200,000-sample dataset takes until its files
// can be read, on loopback and through links of 20 and 150 ms round trip (Toxiproxy):
// connecting, schema, the index (from the snapshot an ingest stores, and by the scan of
// every metadata row, --scan-index) and the stored splits. Samples are tiny (the scan
// reads metadata rows, never blobs).
func BenchmarkMountStart(b *testing.B) {
	const count = 200_000
	ctx := context.Background()
	ds := newDataset(b, "mountstart")
	st := openStore(b, ds, true)
	if err := st.AddColumns(ctx, []string{"patient_id"}); err != nil {
		b.Fatal(err)
	}
	if err := st.SetLabels(ctx, []string{"normal", "tumor"}); err != nil {
		b.Fatal(err)
	}
	parallel(b, 64, count, func(k int) error {
		name := fmt.Sprintf("%s/tile_%07d.jpg", []string{"normal", "tumor"}[k%2], k)
		data := []byte(name)
		return st.Put(ctx, store.Sample{ID: store.SampleID(ds, name), Label: k % 2, Name: name, Size: int64(len(data)),
			Checksum: store.Checksum(data), CRC32C: store.CRC32C(data), HasCRC32C: true,
			Meta: map[string]string{"patient_id": fmt.Sprint(k / 100)}}, data, nil)
	})
	// As an ingest leaves it: marked changed, then a snapshot.
	if err := st.MarkChanged(ctx); err != nil {
		b.Fatal(err)
	}
	if _, _, err := index.StoreSnapshot(ctx, st); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		for _, rtt := range []time.Duration{0, 20 * time.Millisecond, 150 * time.Millisecond} {
			var args []string
			name := "rtt-0.1ms"
			if rtt > 0 {
				args = newLink(b, linkSpec{Name: fmt.Sprintf("start%v", rtt), RTT: rtt}).mountArgs()
				name = fmt.Sprintf("rtt-%dms", rtt.Milliseconds())
			}
			for _, from := range []string{"snapshot", "scan"} {
				start := time.Now()
				m := startMount(b, ds, append(args, fmt.Sprint("--scan-index=", from == "scan"))...)
				ready := time.Since(start)
				b.Logf("%s from the %s: ready after %v; the mount's log:\n%s", name, from, ready.Round(time.Millisecond), m.stderr.String())
				m.stop(b)
				b.ReportMetric(ready.Seconds(), name+"-"+from+"-ready-s")
			}
		}
	}
}
