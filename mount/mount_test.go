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
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

// TestDebugFUSEGoesToTheMountsLogger: with DebugFUSE, go-fuse's request log reaches the
// mount's own logger (so --log-file holds it), not the process's standard error; and an
// unmounted mount leaves no control socket behind.
func TestDebugFUSEGoesToTheMountsLogger(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting with DirectMount needs root")
	}
	for _, debug := range []bool{false, true} {
		st := memstore.New("ds", memstore.Options{})
		testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1", "class2"}))
		for i := range 30 {
			s, data := storetest.MakeSample("ds", i, i%3, 1000+i)
			testkit.Check(t, st.Put(context.Background(), s, data, nil))
		}
		var logs testkit.SyncBuffer
		o := Defaults()
		o.DebugFUSE = debug
		m := testkit.Must(Open(context.Background(), st, o, slog.New(slog.NewTextHandler(&logs, nil))))(t)
		dir := t.TempDir()
		srv := testkit.Must(m.Serve(context.Background(), dir))(t)
		testkit.Check(t, srv.WaitMount())
		testkit.Must(os.ReadFile(filepath.Join(dir, "all", "epoch-0", "file_list.txt")))(t)
		testkit.Check(t, srv.Unmount())
		m.Close()
		if got := strings.Contains(logs.String(), "LOOKUP"); got != debug {
			t.Errorf("DebugFUSE %v: LOOKUPs in the mount's log: %v, want %v\n%s", debug, got, debug, logs.String())
		}
		if _, err := os.Stat(ControlSocket(dir)); !os.IsNotExist(err) {
			t.Errorf("control socket of an unmounted mount: %v, want none", err)
		}
	}
}

// Names are streamed where the link is short: judged by the smaller of the prefetcher's
// estimate and the store's shortest answer, since the estimate can be a start's queue.
func TestStreamsWhereTheLinkIsShort(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		estimate, roundTrip time.Duration
		want                bool
	}{
		{0, 0, false},               // nothing measured yet
		{2 * ms, 0, true},           // a store that measures nothing
		{0, 1 * ms, true},           // no prefetch back yet
		{80 * ms, 1 * ms, true},     // the first prefetches queued at a busy node
		{150 * ms, 150 * ms, false}, // a long link
		{2 * ms, 150 * ms, true},    // the link got shorter
		{streamBelow, 0, false},     // the bound itself is not below it
	} {
		if got := streamsAt(tc.estimate, tc.roundTrip); got != tc.want {
			t.Errorf("streamsAt(%v, %v) = %v, want %v", tc.estimate, tc.roundTrip, got, tc.want)
		}
	}
}
