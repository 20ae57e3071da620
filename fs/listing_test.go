package fs_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	cfs "github.com/cassfs/cassfs/fs"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
)

// TestDeclinedListingIsTriedAgain: a class directory whose listing was declined because a
// sample of it was not at hand (paged out since the last epoch, not fetched yet) is listed
// once it is, further on in the epoch, not looked up name by name to the epoch's end.
func TestDeclinedListingIsTriedAgain(t *testing.T) {
	const n, every = 400, 8
	f := newFixture(t, n, classes, memstore.Options{})
	var withheld atomic.Bool
	mnt, fsys, _, stop := lookaheadMount(t, f, false, every, func(c *cfs.Config) {
		has := c.Held
		c.Held = func(i uint32) bool { return has(i) && !withheld.Load() }
	})
	defer stop()
	readEpochInOrder(t, f, filepath.Join(mnt, "all", "epoch-0"))
	// No sample is at hand until the reader is a quarter through epoch 1: every listing is
	// declined at first.
	withheld.Store(true)
	req := fsys.RequestStats()
	for k, p := range epochPaths(t, mnt, "1") {
		if k == n/4 {
			withheld.Store(false)
		}
		testkit.Must(os.ReadFile(p))(t)
	}
	lookups, plus := fsys.RequestStats()["lookup"]-req["lookup"], fsys.RequestStats()["readdirplus"]-req["readdirplus"]
	// The first quarter's names are the reader's own (the helper waits for samples at hand);
	// without listings every later one costs a LOOKUP too.
	if plus == 0 || lookups > int64(n*7/8) {
		t.Errorf("epoch 1, its class directories' listings declined at first: %d LOOKUPs, %d READDIRPLUS for %d files; want them listed once every sample is at hand", lookups, plus, n)
	}
}
