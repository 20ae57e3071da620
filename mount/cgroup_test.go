package mount

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
)

// TestParseMemoryCgroup: the memory cgroup is found for v1 (with a v2 hierarchy beside it,
// as on hosts mid-migration), v2 alone, a cgroup namespace (the mount's root is the
// process's cgroup), and not at all; its levels run up to the hierarchy's root.
func TestParseMemoryCgroup(t *testing.T) {
	v1 := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	v2 := `30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
`
	ns := `30 23 0:27 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw
`
	for _, tc := range []struct {
		name, cgroup, mountinfo string
		v2                      bool
		want                    []string
	}{
		{"v1 beside v2", "9:name=systemd:/\n4:memory:/api/79d5\n1:cpu:/\n0::/\n", v1, false,
			[]string{"/sys/fs/cgroup/memory/api/79d5", "/sys/fs/cgroup/memory/api", "/sys/fs/cgroup/memory"}},
		{"v2", "0::/system.slice/cassfs.service\n", v2, true,
			[]string{"/sys/fs/cgroup/system.slice/cassfs.service", "/sys/fs/cgroup/system.slice", "/sys/fs/cgroup"}},
		{"namespace", "0::/\n", ns, true, []string{"/sys/fs/cgroup"}},
		{"no controller", "1:cpu:/\n", "36 31 0:33 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := testkit.Must(parseMemoryCgroup([]byte(tc.cgroup), []byte(tc.mountinfo), func(string) bool { return true }))(t)
			if tc.want == nil {
				if cg != nil {
					t.Fatalf("got %+v, want none", cg)
				}
				return
			}
			if cg == nil || cg.v2 != tc.v2 || !slices.Equal(cg.levels, tc.want) {
				t.Fatalf("got %+v, want v2=%v levels %q", cg, tc.v2, tc.want)
			}
		})
	}
	// v2 without the memory controller enabled for the cgroup: none.
	cg := testkit.Must(parseMemoryCgroup([]byte("0::/a\n"), []byte(v2), func(string) bool { return false }))(t)
	if cg != nil {
		t.Errorf("v2 without memory.current: %+v, want none", cg)
	}
}

// writeCgroup writes a cgroup level's files under dir.
func writeCgroup(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	testkit.Check(t, os.MkdirAll(dir, 0o755))
	for name, v := range files {
		testkit.Check(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644))
	}
}

// TestMemoryCgroupRead: the level with the least room is reported (a pod's limit above a
// container without one), with its page cache; no limit is math.MaxInt64 in both versions.
func TestMemoryCgroupRead(t *testing.T) {
	root := t.TempDir()
	pod, ctr := filepath.Join(root, "pod"), filepath.Join(root, "pod", "ctr")
	writeCgroup(t, root, map[string]string{"memory.max": "max\n", "memory.current": "900000000\n"})
	writeCgroup(t, pod, map[string]string{"memory.max": "500000000\n", "memory.current": "300000000\n", "memory.stat": "anon 100\nfile 123456\n"})
	writeCgroup(t, ctr, map[string]string{"memory.max": "max\n", "memory.current": "250000000\n", "memory.stat": "anon 100\nfile 5\n"})
	m := testkit.Must((&memoryCgroup{v2: true, levels: []string{ctr, pod, root}}).read())(t)
	if m.Dir != pod || m.Limit != 500000000 || m.Usage != 300000000 || m.Cache != 123456 || !m.Limited() {
		t.Errorf("v2: %+v, want the pod's level: limit 500000000, usage 300000000, cache 123456", m)
	}

	v1 := filepath.Join(t.TempDir(), "memory", "api")
	writeCgroup(t, v1, map[string]string{"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "4096\n", "memory.stat": "cache 77\ntotal_cache 88\n"})
	m = testkit.Must((&memoryCgroup{levels: []string{v1}}).read())(t)
	if m.Limit != math.MaxInt64 || m.Limited() || m.Usage != 4096 || m.Cache != 88 {
		t.Errorf("v1 without a limit: %+v, want no limit, usage 4096, cache 88 (total_cache)", m)
	}
	if _, err := (&memoryCgroup{levels: []string{filepath.Join(root, "gone")}}).read(); err == nil {
		t.Error("a cgroup without its files: no error")
	}
}

// TestPushRoom: pushes take room up to what the limit leaves less the margin and what the
// heap may still grow by; more are refused until a look finds room again; without a limit
// every push is taken.
func TestPushRoom(t *testing.T) {
	figures := cgroupMemory{Limit: 1 << 30, Usage: 600 << 20}
	r := &pushRoom{now: func() cgroupMemory { return figures }, heapGrowth: func() int64 { return 100 << 20 }}
	r.look()
	// 1024 - 600 - 100 (heap) - 64 (margin: a sixteenth) = 260 MiB
	if !r.take(200<<20) || !r.take(60<<20) {
		t.Fatalf("pushes within the room refused (%d left)", r.room.Load())
	}
	if r.take(1 << 20) {
		t.Errorf("a push beyond the room taken, want it refused")
	}
	figures.Usage = 500 << 20
	r.look()
	if !r.take(100 << 20) {
		t.Error("room freed (usage down 100 MiB) not taken")
	}
	figures.Limit = math.MaxInt64
	r.look()
	if !r.take(10 << 30) {
		t.Error("without a limit, a push refused")
	}
}

// TestMemoryMetrics: the cgroup's limit, usage and page cache are exported as read at
// scrape time; no limit is +Inf.
func TestMemoryMetrics(t *testing.T) {
	dir := t.TempDir()
	writeCgroup(t, dir, map[string]string{"memory.max": "500000000\n", "memory.current": "300000000\n", "memory.stat": "anon 1\nfile 123456\n"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(memoryCollector{&memoryCgroup{v2: true, levels: []string{dir}}})
	got := func() map[string]float64 {
		fams := testkit.Must(reg.Gather())(t)
		m := map[string]float64{}
		for _, f := range fams {
			m[f.GetName()] = f.Metric[0].GetGauge().GetValue()
		}
		return m
	}
	want := map[string]float64{"cassfs_memory_limit_bytes": 500000000, "cassfs_memory_usage_bytes": 300000000, "cassfs_memory_page_cache_bytes": 123456}
	if m := got(); !maps.Equal(m, want) {
		t.Errorf("memory metrics %v, want %v", m, want)
	}
	writeCgroup(t, dir, map[string]string{"memory.max": "max\n"})
	if m := got(); !math.IsInf(m["cassfs_memory_limit_bytes"], 1) {
		t.Errorf("without a limit: cassfs_memory_limit_bytes %v, want +Inf", m["cassfs_memory_limit_bytes"])
	}
}
