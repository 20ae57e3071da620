package readbench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMeasureCountsWhatWasRead: every k is read once, failures are counted apart from the
// files and bytes read, and every read's latency is kept.
func TestMeasureCountsWhatWasRead(t *testing.T) {
	seen := make([]int, 100)
	r := Measure("p", 100, 4, func(k int) (int, error) {
		seen[k]++ // each k goes to one reader only
		if k%10 == 3 {
			return 0, errors.New("boom")
		}
		time.Sleep(time.Duration(k) * time.Microsecond)
		return k, nil
	})
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("file %d read %d times", k, n)
		}
	}
	want := int64(0)
	for k := range 100 {
		if k%10 != 3 {
			want += int64(k)
		}
	}
	if r.Files != 90 || r.Errors != 10 || r.Bytes != want || len(r.Lat) != 100 || r.Daemon != -1 || r.Fetches != -1 {
		t.Errorf("got %d files, %d errors, %d bytes, %d latencies, daemon %v, fetches %v; want 90, 10, %d, 100, -1, -1", r.Files, r.Errors, r.Bytes, len(r.Lat), r.Daemon, r.Fetches, want)
	}
	if r.Pct(0.99) < r.Pct(0.5) || r.Pct(0.5) <= 0 {
		t.Errorf("p50 %v, p99 %v", r.Pct(0.5), r.Pct(0.99))
	}
}

// TestPrintRatios: every path is shown against the first; figures not measured are dashes.
func TestPrintRatios(t *testing.T) {
	var out strings.Builder
	Print(&out, []Result{
		{Path: "store", Files: 100, Elapsed: time.Second, Daemon: -1, Fetches: -1},
		{Path: "mount", Files: 100, Elapsed: 2 * time.Second, Daemon: 0.05, Fetches: 110},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "1.00×") || !strings.Contains(lines[2], "0.50×") || !strings.Contains(lines[2], "500") || !strings.Contains(lines[2], "1.100") || strings.Count(lines[1], "—") != 2 {
		t.Errorf("table:\n%s", out.String())
	}
}
