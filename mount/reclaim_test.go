package mount

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
)

// damonTree writes a DAMON sysfs tree under a temporary directory: one kdamond in state
// with one scheme of action.
func damonTree(t *testing.T, state, action string) string {
	t.Helper()
	admin := t.TempDir()
	kd := filepath.Join(admin, "kdamonds", "0")
	scheme := filepath.Join(kd, "contexts", "0", "schemes", "0")
	testkit.Check(t, os.MkdirAll(scheme, 0o755))
	testkit.Check(t, os.WriteFile(filepath.Join(kd, "state"), []byte(state+"\n"), 0o644))
	testkit.Check(t, os.WriteFile(filepath.Join(scheme, "action"), []byte(action+"\n"), 0o644))
	return admin
}

// TestProactivePageout: only a kdamond that is on with a pageout scheme counts; no DAMON
// interface at all counts as none.
func TestProactivePageout(t *testing.T) {
	for _, tc := range []struct {
		state, action string
		want          bool
	}{
		{"on", "pageout", true},
		{"off", "pageout", false},
		{"on", "stat", false},
	} {
		if got := proactivePageout(damonTree(t, tc.state, tc.action)); got != tc.want {
			t.Errorf("kdamond %s, scheme %s: proactivePageout = %v, want %v", tc.state, tc.action, got, tc.want)
		}
	}
	if proactivePageout(filepath.Join(t.TempDir(), "absent")) {
		t.Error("no DAMON interface: proactivePageout = true")
	}
}

// TestReclaimHint: the mount says once that a disk tier would serve what the pageout takes,
// only where that costs fetches: pushing, no --cache-dir, and a dataset beyond --cache-size.
func TestReclaimHint(t *testing.T) {
	on, off := damonTree(t, "on", "pageout"), damonTree(t, "off", "pageout")
	base := Options{Push: true, CacheBytes: 1 << 20}
	noPush, tier := base, base
	noPush.Push = false
	tier.CacheDir = t.TempDir()
	for _, tc := range []struct {
		name   string
		o      Options
		bytes  int64
		admin  string
		hinted bool
	}{
		{"beyond --cache-size, pageout on", base, 2 << 20, on, true},
		{"pageout off", base, 2 << 20, off, false},
		{"fits in --cache-size", base, 1 << 20, on, false},
		{"--push=false", noPush, 2 << 20, on, false},
		{"--cache-dir", tier, 2 << 20, on, false},
	} {
		var out bytes.Buffer
		reclaimHint(tc.o, tc.bytes, tc.admin, slog.New(slog.NewTextHandler(&out, nil)))
		if got := strings.Contains(out.String(), "--cache-dir"); got != tc.hinted {
			t.Errorf("%s: hinted %v, want %v (log: %q)", tc.name, got, tc.hinted, out.String())
		}
	}
}
