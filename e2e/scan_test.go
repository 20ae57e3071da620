//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// freezeToxic freezes, once, the connection on which the first chunk containing Marker
// passes: for HoldMS milliseconds from then on nothing of it passes, then everything does.
// A node whose reads of one kind are stuck, not a dead node: the other connections go on,
// and nothing is dropped, so the CQL stream stays whole (requests whose deadline passed
// meanwhile are answered late, and the driver ignores those answers).
type freezeToxic struct {
	Marker string `json:"marker"`
	HoldMS int64  `json:"hold_ms"`

	mu    sync.Mutex
	fired bool // guarded by mu
}

// freezeState is one connection's: when its freeze ends (zero: not frozen).
type freezeState struct{ until time.Time }

func (f *freezeToxic) NewState() any { return new(freezeState) }

func (f *freezeToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*freezeState)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			f.mu.Lock()
			if !f.fired && strings.Contains(string(c.Data), f.Marker) {
				f.fired, st.until = true, time.Now().Add(time.Duration(f.HoldMS)*time.Millisecond)
			}
			f.mu.Unlock()
			if wait := time.Until(st.until); wait > 0 {
				select {
				case <-time.After(wait):
				case <-stub.Interrupt:
					stub.Output <- c // never drop data
					return
				}
			}
			stub.Output <- c
		}
	}
}

func init() { toxics.Register("freeze", new(freezeToxic)) }

// freezeOnScan is a link that freezes the connection of the first page of a metadata scan
// of dataset ds for hold.
func freezeOnScan(t *testing.T, name, ds string, hold time.Duration) *link {
	ln := newLink(t, linkSpec{Name: name})
	js := fmt.Sprintf(`{"name":"freeze","type":"freeze","stream":"upstream","toxicity":1,"attributes":{"marker":%q,"hold_ms":%d}}`,
		ds+".samples WHERE token(id)", hold.Milliseconds())
	if _, err := ln.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestScanThroughAFrozenConnection: (with --scan-index, as the dataset has an index snapshot)
// the connection of the metadata scan's first page freezes
// for 4 s, longer than three request deadlines (--timeout 1s; a scan that gave a range
// three tries would fail the mount): the mount still starts with the whole dataset, and dataset
// list, frozen the same way, prints the dataset's true count.
func TestScanThroughAFrozenConnection(t *testing.T) {
	d := sharedDataset(t)
	const hold = 4 * time.Second
	ln := freezeOnScan(t, "scanfreeze", d.name, hold)
	start := time.Now()
	m := startMount(t, d.name, append(ln.mountArgs(), "--timeout", "1s", "--prefetch", "0", "--scan-index")...)
	t.Logf("mounted in %v through a %v freeze", time.Since(start).Round(time.Millisecond), hold)
	paths, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-0"))
	if len(paths) != len(d.sha) {
		t.Errorf("the mount lists %d samples, want %d", len(paths), len(d.sha))
	}
	m.stop(t)

	// dataset list reads a current snapshot too: without one, it scans.
	s := cql(t, d.name)
	defer s.Close()
	if err := s.Query(`DELETE FROM info WHERE key = 'snapshot'`).Exec(); err != nil {
		t.Fatal(err)
	}
	ln = freezeOnScan(t, "listfreeze", d.name, hold)
	start = time.Now()
	r := cassfs(t, append([]string{"dataset", "list", "--timeout", "1s"}, ln.mountArgs()...)...)
	t.Logf("dataset list took %v through a %v freeze", time.Since(start).Round(time.Millisecond), hold)
	if r.code != 0 || !regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%d\s`, d.name, len(d.sha))).MatchString(r.stdout) {
		t.Errorf("dataset list through a frozen node: %s", r)
	}
	// The snapshot back, by the command for datasets without one.
	r = cassfs(t, "dataset", "snapshot", d.name)
	if want := fmt.Sprintf("dataset %s: index snapshot stored: %d samples", d.name, len(d.sha)); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("dataset snapshot: %s; want %q", r, want)
	}
}

// TestMountStartsFromTheIndexSnapshot: the ingest stored an index snapshot, so a mount
// reads no metadata row: through a link that would freeze the scan for longer than the
// test, it starts at once, says it started from the snapshot, and lists every sample.
func TestMountStartsFromTheIndexSnapshot(t *testing.T) {
	d := sharedDataset(t)
	ln := freezeOnScan(t, "snapshotstart", d.name, 10*time.Minute)
	start := time.Now()
	m := startMount(t, d.name, append(ln.mountArgs(), "--timeout", "1s", "--prefetch", "0")...)
	took := time.Since(start)
	paths, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-0"))
	if len(paths) != len(d.sha) {
		t.Errorf("the mount lists %d samples, want %d", len(paths), len(d.sha))
	}
	if log := m.log(); !strings.Contains(log, "from=snapshot") {
		t.Errorf("the mount did not start from the snapshot (in %v): %s", took, log)
	}
}
