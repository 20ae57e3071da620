//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultTimeout is the --timeout of the fault matrix's mounts: disturbances shorter than it
// must cost readers nothing, longer ones EIO within a bound of it.
const faultTimeout = 3 * time.Second

// linkFault is one case of the fault matrix: a Toxiproxy toxic put on the link while a
// reader walks an epoch, for hold, then taken off.
type linkFault struct {
	name  string
	toxic string // Toxiproxy toxic, JSON
	hold  time.Duration
	order string
	// errorsAllowed: the disturbance outlasts --timeout, so reads in it may fail (with EIO).
	errorsAllowed bool
	// stopDuring: SIGTERM the mount while the toxic is on; it must unmount all the same.
	stopDuring bool
}

// faultRead is what one read of the faulted epoch gave.
type faultRead struct {
	path  string
	sum   string // hex SHA-256 of the content; "" after an error
	err   error
	begin time.Time
	took  time.Duration
}

// TestLinkFaults is the fault matrix of a wide-area link, in user space (Toxiproxy, 20 ms
// RTT). For each case a mount with a small cache (so that reads keep fetching) and a
// short prefetch window serves a paced reader walking epoch 0 while the link misbehaves:
//
//   - reset: every connection, and every new one, reset by the peer for 2 s;
//   - cut: every connection closed after 64 KiB (mid-frame) for 1.5 s;
//   - black-hole: data dropped on the floor, connections left open, for --timeout + 2 s
//     (the streams lose bytes: a connection must not be used again);
//   - drip: the database's answers at 10 KB/s for --timeout + 1 s;
//   - black-hole-stop: a black hole during which the mount is sent SIGTERM.
//
// In every case each read gives the right bytes (the content of a source file of the
// name's class, no sample twice; under strict order exactly the name's sample) or EIO,
// never wrong or short data, and no read takes longer than the bound of a few deadlines; a
// disturbance shorter than --timeout costs no error. During it listings and cassfs stats
// answer; afterwards the mount recovers by itself (the next epoch reads completely and
// right) and its goroutines return to their level.
func TestLinkFaults(t *testing.T) {
	d := sharedDataset(t)
	cases := []linkFault{
		{name: "reset", toxic: `{"type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`, hold: 2 * time.Second, order: "arrival"},
		{name: "cut", toxic: `{"type":"limit_data","stream":"downstream","attributes":{"bytes":65536}}`, hold: 1500 * time.Millisecond, order: "strict"},
		{name: "black-hole", toxic: `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, hold: faultTimeout + 2*time.Second, order: "arrival", errorsAllowed: true},
		{name: "drip", toxic: `{"type":"bandwidth","stream":"downstream","attributes":{"rate":10}}`, hold: faultTimeout + time.Second, order: "strict", errorsAllowed: true},
		{name: "black-hole-stop", toxic: `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, hold: faultTimeout, order: "arrival", errorsAllowed: true, stopDuring: true},
	}
	var table []string
	for _, fc := range cases {
		t.Run(fc.name, func(t *testing.T) {
			row := runLinkFault(t, d, fc)
			table = append(table, row)
		})
	}
	t.Logf("fault matrix (case | order | errors seen by readers | worst read | recovery):\n%s", strings.Join(table, "\n"))
}

func runLinkFault(t *testing.T, d *srcDataset, fc linkFault) string {
	l := newLink(t, linkSpec{Name: "fault-" + fc.name, RTT: 20 * time.Millisecond})
	args := append(l.mountArgs(), "--timeout", faultTimeout.String(), "--order", fc.order,
		"--cache-size", "4MiB", "--prefetch", "16", "--prefetch-in-flight", "8", "--metrics-addr", "127.0.0.1:0")
	m := startMount(t, d.name, args...)
	url := metricsURL(t, m)
	epoch := filepath.Join(m.dir, "all", "epoch-0")
	names, _ := fileList(t, epoch)

	// A paced reader (4 goroutines, at most 100 files/s) so that the fault meets fetches in
	// flight.
	reads := make([]faultRead, len(names))
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	started := make(chan struct{})
	var startOnce sync.Once
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tick.C {
				mu.Lock()
				k := next
				next++
				mu.Unlock()
				if k >= len(names) {
					return
				}
				if k == 40 {
					startOnce.Do(func() { close(started) })
				}
				p := filepath.Join(epoch, names[k])
				begin := time.Now()
				data, err := os.ReadFile(p)
				r := faultRead{path: names[k], err: err, begin: begin, took: time.Since(begin)}
				if err == nil {
					sum := sha256.Sum256(data)
					r.sum = hex.EncodeToString(sum[:])
				}
				reads[k] = r
			}
		}()
	}
	goroutinesBefore := goroutines(t, url)

	<-started
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(`{"name":"fault",%s`, fc.toxic[1:]))); err != nil {
		t.Fatal(err)
	}
	faultOn := time.Now()
	// While the link misbehaves: listings and cassfs stats answer.
	if entries, err := os.ReadDir(epoch); err != nil || len(entries) == 0 {
		t.Errorf("listing during the fault: %d entries, %v", len(entries), err)
	}
	if r := cassfs(t, "stats", "--interval", "100ms", m.dir); r.code != 0 {
		t.Errorf("cassfs stats during the fault: %s", r)
	}
	if fc.stopDuring {
		stopStart := time.Now()
		m.stop(t)
		t.Logf("SIGTERM during the fault: unmounted after %v", time.Since(stopStart).Round(time.Millisecond))
		if isMounted(m.dir) {
			t.Errorf("still mounted after SIGTERM")
		}
		l.proxy.Toxics.RemoveToxic(context.Background(), "fault")
		wg.Wait()
		for _, r := range reads {
			if r.err == nil && r.sum != "" {
				checkFaultRead(t, d, fc, r, nil)
			}
		}
		return fmt.Sprintf("| %s | %s | (unmounted during the fault) | — | — |", fc.name, fc.order)
	}
	time.Sleep(time.Until(faultOn.Add(fc.hold)))
	if err := l.proxy.Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	wg.Wait()

	// The faulted epoch: right bytes or EIO, within the bound.
	bound := 3*faultTimeout + 2*time.Second
	seen := map[string]bool{}
	failed, worst := 0, time.Duration(0)
	var firstErr error
	for _, r := range reads {
		worst = max(worst, r.took)
		if r.took > bound {
			t.Errorf("%s took %v, beyond %v (a few deadlines)", r.path, r.took.Round(time.Millisecond), bound)
		}
		if r.err != nil {
			failed++
			firstErr = firstErrOf(firstErr, r.err)
			if !errors.Is(r.err, syscall.EIO) {
				t.Errorf("%s failed with %v, want EIO", r.path, r.err)
			}
			continue
		}
		checkFaultRead(t, d, fc, r, seen)
	}
	if failed > 0 && !fc.errorsAllowed {
		t.Errorf("a disturbance of %v (shorter than --timeout %v) cost readers %d errors, the first %v; %s", fc.hold, faultTimeout, failed, firstErr, m.log())
	}

	// Recovery: the first read begun after the link healed that succeeded, measured from
	// the healing; then the next epoch reads completely and right, with no error.
	recovered := time.Duration(-1)
	for _, r := range reads {
		if r.err == nil && !r.begin.Before(healed) && (recovered < 0 || r.begin.Add(r.took).Sub(healed) < recovered) {
			recovered = r.begin.Add(r.took).Sub(healed)
		}
	}
	next1 := filepath.Join(m.dir, "all", "epoch-1")
	names1, _ := fileList(t, next1)
	seen1 := map[string]bool{}
	for k, n := range names1 {
		data, err := os.ReadFile(filepath.Join(next1, n))
		if err != nil {
			t.Fatalf("epoch 1 after the link healed: %s: %v; %s", n, err, m.log())
		}
		if k == 0 && recovered < 0 {
			recovered = time.Since(healed) // no read of epoch 0 began after the healing
		}
		sum := sha256.Sum256(data)
		checkFaultRead(t, d, fc, faultRead{path: n, sum: hex.EncodeToString(sum[:])}, seen1)
	}
	if len(seen1) != len(d.sha) {
		t.Errorf("epoch 1 after the fault read %d samples, want %d", len(seen1), len(d.sha))
	}
	// Goroutines return to their level (fetches and the driver's reconnects end).
	deadline := time.Now().Add(15 * time.Second)
	for after := goroutines(t, url); after > goroutinesBefore+10; after = goroutines(t, url) {
		if time.Now().After(deadline) {
			t.Errorf("goroutines %v after the fault, %v before", after, goroutinesBefore)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rss, _ := metricValue(scrape(t, url), "process_resident_memory_bytes"); rss > rssBound(t, 4<<20, d.ix.Len()) {
		t.Errorf("resident memory %.0f MiB after the fault, over the %.0f MiB --help promises", rss/(1<<20), rssBound(t, 4<<20, d.ix.Len())/(1<<20))
	}
	t.Logf("%s (%s): %d of %d reads failed (first: %v); worst read %v; first read after healing %v",
		fc.name, fc.order, failed, len(reads), firstErr, worst.Round(time.Millisecond), recovered.Round(time.Millisecond))
	return fmt.Sprintf("| %s | %s | %d of %d | %v | %v |", fc.name, fc.order, failed, len(reads), worst.Round(10*time.Millisecond), recovered.Round(10*time.Millisecond))
}

// checkFaultRead checks that a read's content is a source file of its name's class, not
// read before in the epoch (seen; nil: not checked), and under strict order the name's own.
func checkFaultRead(t *testing.T, d *srcDataset, fc linkFault, r faultRead, seen map[string]bool) {
	t.Helper()
	rel, ok := d.byHash[r.sum]
	switch {
	case !ok:
		t.Errorf("%s: content matches no source file", r.path)
	case class(rel) != class(r.path):
		t.Errorf("%s: content of %s, another class", r.path, rel)
	case fc.order == "strict" && rel != origName(r.path):
		t.Errorf("%s: content of %s under strict order", r.path, rel)
	case seen != nil && seen[rel]:
		t.Errorf("%s: %s served twice in one epoch", r.path, rel)
	}
	if seen != nil {
		seen[rel] = true
	}
}

func goroutines(t *testing.T, url string) float64 {
	v, ok := metricValue(scrape(t, url), "go_goroutines")
	if !ok {
		t.Fatal("no go_goroutines in the metrics")
	}
	return v
}

// firstErrOf keeps the first error.
func firstErrOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
