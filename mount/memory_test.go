package mount

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

// runtimeSetting reads one of the runtime's settings ("/gc/gogc:percent",
// "/gc/gomemlimit:bytes") without changing it.
func runtimeSetting(name string) uint64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// scanWatcher is a store whose Scan (the index load) notes the collector's target.
type scanWatcher struct {
	store.Store
	gogc uint64
}

func (w *scanWatcher) Scan(ctx context.Context, fn func(store.Sample) error) error {
	w.gogc = runtimeSetting("/gc/gogc:percent")
	return w.Store.Scan(ctx, fn)
}

// smallStore is a dataset of n samples in three classes.
func smallStore(t *testing.T, n int) store.Store {
	t.Helper()
	st := memstore.New("ds", memstore.Options{})
	testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1", "class2"}))
	for i := range n {
		s, data := storetest.MakeSample("ds", i, i%3, 1000+i)
		testkit.Check(t, st.Put(context.Background(), s, data, nil))
	}
	return st
}

// TestOpenSetsNothingProcessWide: opening a mount leaves the collector's target and the
// heap limit as they were, during the index load and after; TightGC and SetMemoryLimit,
// the process's calls, set them: GOGC=25 while loading, then the limit MemoryLimit
// computes for the mounts, one MemOverhead each. GOGC and GOMEMLIMIT in the environment
// win.
func TestOpenSetsNothingProcessWide(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 40))
	log := slog.New(slog.DiscardHandler)
	o := Defaults()
	o.Splits = ""

	w := &scanWatcher{Store: smallStore(t, 30)}
	m := testkit.Must(Open(context.Background(), w, o, log))(t)
	defer m.Close()
	if w.gogc != 100 || runtimeSetting("/gc/gogc:percent") != 100 {
		t.Errorf("Open set GOGC: %d while loading, %d after, want 100 (the process's)", w.gogc, runtimeSetting("/gc/gogc:percent"))
	}
	if got := runtimeSetting("/gc/gomemlimit:bytes"); got != 1<<40 {
		t.Errorf("Open set the memory limit to %d, want it left at %d", got, 1<<40)
	}

	restore := TightGC()
	w2 := &scanWatcher{Store: smallStore(t, 60)}
	m2 := testkit.Must(Open(context.Background(), w2, o, log))(t)
	defer m2.Close()
	restore()
	if w2.gogc != 25 || runtimeSetting("/gc/gogc:percent") != 100 {
		t.Errorf("with TightGC: GOGC %d while loading, %d after, want 25 then 100", w2.gogc, runtimeSetting("/gc/gogc:percent"))
	}

	// The cache, then per sample 100 bytes and 8 per split shown ("all" alone), per member
	// of a split shown 4 and 8 per epoch view, then the overhead.
	one := int64(1<<30) + 30*(100+8) + 30*(4+8*4) + MemOverhead
	two := int64(1<<30) + 60*(100+8) + 60*(4+8*4) + MemOverhead
	if got := MemoryLimit(m); got != one {
		t.Errorf("MemoryLimit of a mount of 30 samples: %d, want %d", got, one)
	}
	if got := MemoryLimit(m, m2); got != one+two {
		t.Errorf("MemoryLimit of two mounts: %d, want %d (the sum)", got, one+two)
	}
	SetMemoryLimit(m, m2)
	if got := runtimeSetting("/gc/gomemlimit:bytes"); got != uint64(one+two) {
		t.Errorf("SetMemoryLimit set %d, want %d", got, one+two)
	}

	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 40)
	w3 := &scanWatcher{Store: w.Store}
	restore = TightGC()
	m3 := testkit.Must(Open(context.Background(), w3, o, log))(t)
	defer m3.Close()
	restore()
	SetMemoryLimit(m3)
	if w3.gogc != 100 {
		t.Errorf("with GOGC in the environment, TightGC set %d while loading, want 100", w3.gogc)
	}
	if got := runtimeSetting("/gc/gomemlimit:bytes"); got != 1<<40 {
		t.Errorf("with GOMEMLIMIT in the environment, SetMemoryLimit set %d, want it left", got)
	}
}

// orderStream is a prefetch stream of a fixed order in every epoch.
type orderStream struct {
	name  string
	order []uint32
}

func (s orderStream) Name() string          { return s.name }
func (s orderStream) Order(uint64) []uint32 { return s.order }

// TestMemoryLimitCountsStreams: each stream read beyond one per split shown (shard
// directories, resumed views) holds its future, 8 bytes per sample, and the heap limit
// counts it while it is held.
func TestMemoryLimitCountsStreams(t *testing.T) {
	m := testkit.Must(Open(context.Background(), smallStore(t, 30), Defaults(), slog.New(slog.DiscardHandler)))(t)
	defer m.Close()
	base := MemoryLimit(m)
	order := make([]uint32, 30)
	for k := range order {
		order[k] = uint32(k)
	}
	for r := range 3 {
		m.prefetcher.Access(orderStream{fmt.Sprintf("all/shard-%d-of-3", r), order[r*10 : r*10+10]}, 0)
	}
	if got, want := MemoryLimit(m)-base, int64(2*8*30); got != want {
		t.Errorf("3 streams read with 1 split shown: the limit grew by %d bytes, want %d", got, want)
	}
}
