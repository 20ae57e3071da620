package mount

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/cassfs/cassfs/view"
)

// TestSeveral: two datasets served by one Several at dir/<dataset>, each with half the
// cache; unmounting leaves the directories it made gone and the one that was there.
func TestSeveral(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting with DirectMount needs root")
	}
	var stores []store.Store
	for k, name := range []string{"alpha", "beta"} {
		st := memstore.New(name, memstore.Options{})
		testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1"}))
		for i := range 10 + k {
			s, data := storetest.MakeSample(name, i, i%2, 100+i)
			testkit.Check(t, st.Put(context.Background(), s, data, nil))
		}
		stores = append(stores, st)
	}
	o := Defaults()
	o.CacheBytes = 1 << 20
	s := testkit.Must(OpenSeveral(context.Background(), stores, o, slog.New(slog.DiscardHandler)))(t)
	defer s.Close()
	dir := t.TempDir()
	testkit.Check(t, os.Mkdir(filepath.Join(dir, "beta"), 0o755)) // there before: kept
	testkit.Check(t, s.Serve(context.Background(), dir))
	for k, m := range s.Mounts {
		if m.opts.CacheBytes != 1<<19 {
			t.Errorf("%s: cache of %d bytes, want half the process's", m.dataset, m.opts.CacheBytes)
		}
		testkit.Check(t, s.servers[k].WaitMount())
		list := testkit.Must(os.ReadFile(filepath.Join(dir, m.dataset, "all", "epoch-0", "file_list.txt")))(t)
		if lines := len(strings.Split(strings.TrimSpace(string(list)), "\n")); lines != 10+k {
			t.Errorf("%s: %d files listed, want %d", m.dataset, lines, 10+k)
		}
	}
	testkit.Check(t, s.Unmount())
	left := testkit.Must(os.ReadDir(dir))(t)
	if len(left) != 1 || left[0].Name() != "beta" {
		t.Errorf("after unmounting, %s holds %v: want only beta, which was there before", dir, left)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is still open after Unmount")
	}
}

// sessionStores are n datasets of 200 samples each, read through one session.
func sessionStores(t *testing.T, session *storetest.Session, names ...string) []store.Store {
	t.Helper()
	var stores []store.Store
	for _, name := range names {
		st := memstore.New(name, memstore.Options{})
		testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1"}))
		for i := range 200 {
			s, data := storetest.MakeSample(name, i, i%2, 100+i)
			testkit.Check(t, st.Put(context.Background(), s, data, nil))
		}
		stores = append(stores, session.Store(st))
	}
	return stores
}

// TestDemandReadsNeverWaitBehindAnotherDatasetsPrefetches: two datasets of one process
// (--dataset a,b) read through one database session; while one's prefetches are in flight
// (a stream's first window, 64, beyond the session's 20 slots), a demand read of the other
// finds a slot at once: the prefetches of both together hold no more than the session's
// prefetch share.
func TestDemandReadsNeverWaitBehindAnotherDatasetsPrefetches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting with DirectMount needs root")
	}
	session := storetest.NewSession(20, cassandra.PrefetchShare(20), 200*time.Millisecond)
	o := Defaults()
	o.Splits = ""
	o.Order = view.Strict
	s := testkit.Must(OpenSeveral(context.Background(), sessionStores(t, session, "alpha", "beta"), o, slog.New(slog.DiscardHandler)))(t)
	defer s.Close()
	dir := t.TempDir()
	testkit.Check(t, s.Serve(context.Background(), dir))
	defer func() { testkit.Check(t, s.Unmount()) }()
	for _, srv := range s.servers {
		testkit.Check(t, srv.WaitMount())
	}
	storetest.CheckDemandRead(t, session, filepath.Join(dir, "alpha"), filepath.Join(dir, "beta"), "beta", os.ReadFile)
}
