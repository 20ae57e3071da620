package mount

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/cassfs/cassfs/view"
)

// TestWarmEpochsBeyondTheCacheFetchNothing: a dataset the page cache holds but the memory
// cache does not (a twentieth of it) reads its later epochs with no database fetch under
// pushing: samples whose pages the kernel has are passed over by the prefetcher instead of
// fetched again only for their push to be skipped. Every sample once per epoch, with its
// bytes, under either binding.
func TestWarmEpochsBeyondTheCacheFetchNothing(t *testing.T) {
	// The page cache must keep what the epochs read: no test may drop it meanwhile.
	testkit.LockCaches(t, false)
	for _, order := range []view.Mode{view.Arrival, view.Strict} {
		t.Run(order.String(), func(t *testing.T) {
			const n = 300
			st := smallStore(t, n).(*memstore.Store)
			want := map[[32]byte]int{}
			for i := range n {
				_, data := storetest.MakeSample("ds", i, i%3, 1000+i)
				want[sha256.Sum256(data)]++
			}
			o := Defaults()
			o.Splits = ""
			o.Order = order
			o.CacheBytes = n * 1150 / 20
			m := testkit.Must(Open(context.Background(), st, o, slog.New(slog.DiscardHandler)))(t)
			defer m.Close()
			dir := t.TempDir()
			srv := testkit.Must(m.Serve(context.Background(), dir))(t)
			defer func() { testkit.Check(t, srv.Unmount()) }()
			testkit.Check(t, srv.WaitMount())

			for e := range 3 {
				before := st.Gets()
				ep := filepath.Join(dir, "all", "epoch-"+strconv.Itoa(e))
				list := string(testkit.Must(os.ReadFile(filepath.Join(ep, "file_list.txt")))(t))
				got := map[[32]byte]int{}
				for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
					name, _, _ := strings.Cut(line, " ")
					got[sha256.Sum256(testkit.Must(os.ReadFile(filepath.Join(ep, name)))(t))]++
				}
				if !maps.Equal(got, want) {
					t.Fatalf("epoch %d: the files read are not every sample once", e)
				}
				fetches := st.Gets() - before
				if e > 0 && float64(fetches)/n > 0.05 {
					t.Errorf("epoch %d: %d database fetches for %d files, want at most %.0f (the page cache holds them all; %+v)", e, fetches, n, 0.05*n, m.FS.PushStats())
				}
			}
		})
	}
}
