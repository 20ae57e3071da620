package mount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// memoryCgroup is the memory cgroup of this process: the directories of its levels, its own
// first.
type memoryCgroup struct {
	v2     bool
	levels []string
}

// cgroupMemory is what a memory cgroup reports, at the level with the least room.
type cgroupMemory struct {
	Limit int64 // bytes; math.MaxInt64 where no level has a limit
	Usage int64 // bytes charged, page cache included
	Cache int64 // of which page cache (file pages)
	Dir   string
}

// Room is how many bytes may still be charged before the kernel reclaims.
func (m cgroupMemory) Room() int64 { return m.Limit - m.Usage }

// Limited reports whether a limit is set at all.
func (m cgroupMemory) Limited() bool { return m.Limit < math.MaxInt64/2 }

// findMemoryCgroup finds this process's memory cgroup from /proc/self (nil, nil where there
// is none: not Linux, or no memory controller mounted).
func findMemoryCgroup() (*memoryCgroup, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMemoryCgroup(cg, mi, func(p string) bool { _, err := os.Stat(p); return err == nil })
}

// parseMemoryCgroup finds the memory cgroup from the contents of /proc/self/cgroup and
// /proc/self/mountinfo; exists tells whether a file is there. v1's memory controller wins
// where both are mounted (a v2 hierarchy beside v1 holds no memory controller then).
func parseMemoryCgroup(cgroup, mountinfo []byte, exists func(string) bool) (*memoryCgroup, error) {
	var v1Path, v2Path string
	haveV1, haveV2 := false, false
	for _, line := range strings.Split(string(cgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1Path, haveV1 = parts[2], true
			}
		}
	}
	type mnt struct{ root, point string }
	var v1Mnt, v2Mnt *mnt
	for _, line := range strings.Split(string(mountinfo), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := &mnt{unescapeMount(f[3]), unescapeMount(f[4])}
		switch g[0] {
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "memory" && v1Mnt == nil {
					v1Mnt = m
				}
			}
		case "cgroup2":
			if v2Mnt == nil {
				v2Mnt = m
			}
		}
	}
	levels := func(m *mnt, path string) []string {
		rel, err := filepath.Rel(m.root, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = "." // a cgroup namespace: the mount's root is the process's cgroup
		}
		var out []string
		for {
			out = append(out, filepath.Join(m.point, rel))
			if rel == "." {
				return out
			}
			rel = filepath.Dir(rel)
		}
	}
	switch {
	case haveV1 && v1Mnt != nil:
		return &memoryCgroup{levels: levels(v1Mnt, v1Path)}, nil
	case haveV2 && v2Mnt != nil:
		ls := levels(v2Mnt, v2Path)
		if !exists(filepath.Join(ls[0], "memory.current")) {
			return nil, nil // the memory controller is not enabled for this cgroup
		}
		return &memoryCgroup{v2: true, levels: ls}, nil
	}
	return nil, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// read reports the level with the least room; levels without the files (above a cgroup
// namespace's view) are skipped.
func (c *memoryCgroup) read() (cgroupMemory, error) {
	limitFile, usageFile, cacheKey := "memory.limit_in_bytes", "memory.usage_in_bytes", "total_cache"
	if c.v2 {
		limitFile, usageFile, cacheKey = "memory.max", "memory.current", "file"
	}
	best := cgroupMemory{Limit: math.MaxInt64}
	found := false
	for _, dir := range c.levels {
		limit, err := readCgroupNumber(filepath.Join(dir, limitFile))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return cgroupMemory{}, err
		}
		usage, err := readCgroupNumber(filepath.Join(dir, usageFile))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return cgroupMemory{}, err
		}
		if !found || limit-usage < best.Room() {
			best = cgroupMemory{Limit: limit, Usage: usage, Dir: dir}
			found = true
		}
	}
	if !found {
		return cgroupMemory{}, fmt.Errorf("memory cgroup %s: no %s", c.levels[0], limitFile)
	}
	if st, err := os.ReadFile(filepath.Join(best.Dir, "memory.stat")); err == nil {
		best.Cache = statValue(st, cacheKey)
		if best.Cache < 0 && !c.v2 {
			best.Cache = statValue(st, "cache")
		}
		best.Cache = max(best.Cache, 0)
	}
	return best, nil
}

// readCgroupNumber reads a cgroup file of one number; "max" (v2) and v1's "no limit"
// (a page-rounded 2^63-1) are math.MaxInt64.
func readCgroupNumber(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return math.MaxInt64, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	if n >= math.MaxInt64/2 {
		return math.MaxInt64, nil
	}
	return n, nil
}

// statValue is key's value in a memory.stat file, or -1.
func statValue(stat []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// pushRoom is what the memory cgroup leaves for pages the process pushes: every mount of
// the process asks it before a push (fs.Config.PushRoom), since they all charge one
// cgroup. It looks at the cgroup every pushRoomEvery and counts the bytes pushed in
// between, so a burst of pushes cannot overrun what the last look left.
type pushRoom struct {
	now func() cgroupMemory // the cgroup's figures (tests inject them)
	// heapGrowth is how much more the process's own memory may grow (the Go heap up to
	// its limit, SetMemoryLimit): kept free too, or the heap growing would reclaim pages
	// pushed before.
	heapGrowth func() int64

	room atomic.Int64 // bytes pushes may still charge until the next look
}

// pushRoomEvery is how often a cgroup with a limit is looked at: a few small files read,
// and pushes at the rate a link delivers charge tens of MB in between, which take counts;
// one without a limit is looked at every unlimitedEvery (a limit may be set at run time:
// systemctl set-property).
const (
	pushRoomEvery  = 100 * time.Millisecond
	unlimitedEvery = 2 * time.Second
)

// pushRoomMargin is the room always left free: other charges (the kernel's own for the
// daemon, socket buffers) come without asking, and the kernel reclaims a little before the
// limit.
func pushRoomMargin(limit int64) int64 { return max(32<<20, limit/16) }

// newPushRoom looks at cg once and then every pushRoomEvery, for the life of the process.
func newPushRoom(cg *memoryCgroup, log *slog.Logger) *pushRoom {
	r := &pushRoom{heapGrowth: goHeapGrowth}
	warned := false
	r.now = func() cgroupMemory {
		m, err := cg.read()
		if err != nil {
			if !warned {
				log.Warn("memory cgroup not readable: pushes into the page cache are not held within its limit", "err", err)
				warned = true
			}
			return cgroupMemory{Limit: math.MaxInt64}
		}
		return m
	}
	limited := r.look()
	go func() {
		for {
			every := unlimitedEvery
			if limited {
				every = pushRoomEvery
			}
			time.Sleep(every)
			limited = r.look()
		}
	}()
	return r
}

// look reads the cgroup and sets the room pushes have until the next look; it reports
// whether the cgroup has a limit.
func (r *pushRoom) look() bool {
	m := r.now()
	if !m.Limited() {
		r.room.Store(math.MaxInt64 / 2)
		return false
	}
	r.room.Store(m.Room() - pushRoomMargin(m.Limit) - r.heapGrowth())
	return true
}

// take reports whether n more bytes may be pushed, and counts them if so (the pushes
// refused are counted by package fs: PushStats.OverLimit).
func (r *pushRoom) take(n int64) bool {
	if r.room.Add(-n) >= 0 {
		return true
	}
	r.room.Add(n)
	return false
}

// goHeapGrowth is how much more memory the Go runtime may map before its memory limit
// (0 without one): what the heap may still take from the cgroup.
func goHeapGrowth() int64 {
	limit := debug.SetMemoryLimit(-1)
	if limit >= math.MaxInt64/2 {
		return 0
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	used := int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
	return max(limit-used, 0)
}

// processMemoryCgroup is the process's memory cgroup, found once: nil where there is none.
var processMemoryCgroup = sync.OnceValue(func() *memoryCgroup {
	cg, err := findMemoryCgroup()
	if err != nil {
		slog.Warn("memory cgroup not found: pushes into the page cache are not held within a limit", "err", err)
		return nil
	}
	return cg
})

// processPushRoom is the process's pushRoom, made on first use: nil where the process is
// in no memory cgroup. Every mount of the process shares it: they charge one cgroup.
var processPushRoom = sync.OnceValue(func() *pushRoom {
	cg := processMemoryCgroup()
	if cg == nil {
		return nil
	}
	return newPushRoom(cg, slog.Default())
})
