//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/mount"

	"golang.org/x/sys/unix"
)

// betweenEpochs is the pause before each pass of BenchmarkBeyondCache.
const betweenEpochs = 300 * time.Millisecond

// BenchmarkBeyondCache: later epochs of a dataset the page cache holds but --cache-size
// does not, with default flags (pushing into the page cache) against --push=false and
// local disk with a warm page cache, in one run; once as the daemon runs by itself and
// once in a memory cgroup of --cache-size + 300 MiB, as Kubernetes and systemd run it (v1
// or v2, whichever the machine has). 6,000 generated images (~660 MB), --cache-size
// 128 MiB, the Go reader (16 goroutines, file_list order); a fresh mount per mode reads
// epoch 0 cold and epochs 1–2 warm. Local disk is read before each warm epoch and after
// the last, and its rate is the median of those three passes; every pass starts after a
// pause of betweenEpochs (a training loop's gap between epochs), and an epoch's daemon CPU
// counts from the end of the one before. Reported per row: images/s
// of each warm epoch and its ratio to that median (the slowest and fastest pass beside
// it), the daemon's CPU per image, the database fetches per image (from the mount's
// metrics), the requests that reached the daemon per image, the files whose pages went
// missing (READ although resident, and found short by the helper), and in the cgroup its peak
// usage and OOM kills. A last epoch is read to check every file: the files of an epoch
// are every sample once, byte for byte. A third row reads a dataset that fits in
// --cache-size (the default 1 GiB) the same way. Two more rows read as the first does with
// the pages of 1% of the files dropped before each warm pass, from the mount and the local
// tree alike (dropSome): what a proactive reclaim does by chance, made the same in every
// run; the second of them with a disk tier (--cache-dir on the local tree's file system).
// Reported besides: the CPU the database nodes running on this machine used per image
// (on the cores the readers use), and whether the kernel runs a proactive pageout
// (proactive-pageout-on, 1 or 0). The rows start once the machine is quiet after the
// dataset's ingest (waitQuiet).
func BenchmarkBeyondCache(b *testing.B) {
	const count, readers, batch = 6000, 16, 64
	const dropped = count / 100
	const cacheSize = 128 << 20
	ds, root := benchDataset(b, "beyond", count, 53)
	want := treeSums(b, root)
	waitQuiet(b)
	pageout := 0.0
	if mount.ProactivePageout() {
		pageout = 1
	}
	b.ReportMetric(pageout, "proactive-pageout-on")
	for range b.N {
		tier := b.TempDir() // on the local tree's file system
		for _, row := range []struct {
			tag    string
			cgroup bool
			args   []string
			drop   int // files whose pages are dropped before each warm pass
		}{
			{"push-", false, []string{"--cache-size", strconv.Itoa(cacheSize)}, 0},
			{"nopush-", false, []string{"--cache-size", strconv.Itoa(cacheSize), "--push=false"}, 0},
			{"cgroup-push-", true, []string{"--cache-size", strconv.Itoa(cacheSize)}, 0},
			{"cgroup-nopush-", true, []string{"--cache-size", strconv.Itoa(cacheSize), "--push=false"}, 0},
			{"fits-push-", false, nil, 0},
			{"dropped-push-", false, []string{"--cache-size", strconv.Itoa(cacheSize)}, dropped},
			{"dropped-tier-push-", false, []string{"--cache-size", strconv.Itoa(cacheSize), "--cache-dir", tier, "--cache-dir-size", "2GiB"}, dropped},
		} {
			var cg *memCgroup
			if row.cgroup {
				cg = newMemCgroup(b, cacheSize+300<<20)
			}
			dropPageCache(b)
			dir := b.TempDir()
			args := append(row.args, "--metrics-addr", "127.0.0.1:0")
			var m *mounted
			if cg != nil {
				m = startMountIn(b, cg, dir, ds, args...)
			} else {
				m = startMountAt(b, dir, ds, args...)
			}
			url := metricsURL(b, m)
			epochPaths := func(e int) []string { return epochFiles(b, m.dir, e) }
			fetches := func() float64 { v, _ := metricValue(scrape(b, url), "cassfs_fetch_seconds_count"); return v }
			t0, _, _ := batchTimes(b, epochPaths(0), readers, batch)
			b.ReportMetric(count/t0.Seconds(), row.tag+"epoch0-images/s")
			lines, _ := fileList(b, filepath.Join(m.dir, "all", "epoch-1"))
			local, _ := localCopy(b, root, lines)
			batchTimes(b, local, readers, batch) // local disk's page cache warm
			// Local disk is read before each warm epoch and once after the last, and its
			// rate is the median of those passes: one pass of 6,000 files takes under half
			// a second, and on two cores shared with the database single passes of the
			// same files differ by up to a fifth.
			var localRates []float64
			readLocal := func() {
				tl, _, _ := batchTimes(b, local, readers, batch)
				localRates = append(localRates, count/tl.Seconds())
			}
			requests := func() float64 { return sumMetric(scrape(b, url), "cassfs_fuse_requests_total") }
			// Files whose pages went missing: READ although resident (their readers waited),
			// and found short by the helper's looks.
			lost := func() (reads, found float64) {
				ms := scrape(b, url)
				reads, _ = metricValue(ms, "cassfs_page_cache_resident_reads_total")
				found, _ = metricValue(ms, "cassfs_page_cache_checked_gone_total")
				return reads, found
			}
			epochRates := map[int]float64{}
			// Each pass, local disk's and the mount's, starts after a pause: the gap a
			// training loop leaves between epochs, which the daemon may use (the next
			// epoch's names are bound then). The daemon's CPU, fetches and requests of an
			// epoch count from the end of the one before, the gaps included.
			cpu0, db0, f0, r0 := daemonCPU(b, m), databaseCPU(b), fetches(), requests()
			rr0, fg0 := lost()
			for e := 1; e <= 2; e++ {
				dropSome(b, m.dir, root, e, row.drop)
				time.Sleep(betweenEpochs)
				readLocal()
				time.Sleep(betweenEpochs)
				te, _, _ := batchTimes(b, epochPaths(e), readers, batch)
				cpu, db, f := daemonCPU(b, m)-cpu0, databaseCPU(b)-db0, fetches()-f0
				epochRates[e] = count / te.Seconds()
				b.ReportMetric((requests()-r0)/count, fmt.Sprintf("%sepoch%d-requests/image", row.tag, e))
				b.ReportMetric(epochRates[e], fmt.Sprintf("%sepoch%d-images/s", row.tag, e))
				b.ReportMetric(float64(cpu.Microseconds())/count, fmt.Sprintf("%sepoch%d-daemon-cpu-us/image", row.tag, e))
				b.ReportMetric(float64(db.Microseconds())/count, fmt.Sprintf("%sepoch%d-database-cpu-us/image", row.tag, e))
				b.ReportMetric(f/count, fmt.Sprintf("%sepoch%d-fetches/image", row.tag, e))
				rr, fg := lost()
				b.ReportMetric(rr-rr0, fmt.Sprintf("%sepoch%d-resident-reads", row.tag, e))
				b.ReportMetric(fg-fg0, fmt.Sprintf("%sepoch%d-found-paged-out", row.tag, e))
				cpu0, db0, f0, r0 = daemonCPU(b, m), databaseCPU(b), fetches(), requests()
				rr0, fg0 = rr, fg
			}
			time.Sleep(betweenEpochs)
			readLocal()
			slices.Sort(localRates)
			localRate := localRates[len(localRates)/2]
			b.ReportMetric(localRate, row.tag+"local-disk-images/s")
			b.ReportMetric(localRates[0], row.tag+"local-disk-slowest-images/s")
			b.ReportMetric(localRates[len(localRates)-1], row.tag+"local-disk-fastest-images/s")
			for e, rate := range epochRates {
				b.ReportMetric(rate/localRate, fmt.Sprintf("%sepoch%d/local-disk", row.tag, e))
			}
			if got := epochSums(b, epochPaths(3)); !maps.Equal(got, want) {
				b.Errorf("%sepoch 3: the files read are not every sample once, byte for byte", row.tag)
			}
			errs, _ := metricValue(scrape(b, url), `cassfs_fetch_errors_total\{kind="other"\}`)
			if errs > 0 {
				b.Errorf("%s: %v fetch errors", row.tag, errs)
			}
			m.stop(b)
			if cg != nil {
				peak, kills := cg.peak(b), cg.oomKills(b)
				b.ReportMetric(float64(peak)/(1<<20), row.tag+"cgroup-peak-MiB")
				b.ReportMetric(float64(kills), row.tag+"cgroup-oom-kills")
				if kills > 0 {
					b.Errorf("%s: the daemon was OOM-killed in its cgroup (%d)", row.tag, kills)
				}
			}
		}
	}
}

// dropSome drops the page cache of n samples of epoch e of the mount at dir, chosen at
// random (seeded by e), and of the same files of the local tree at root: the pages a
// proactive reclaim may take between two reads of a file, made to happen the same way in
// both trees (posix_fadvise DONTNEED). The mount's files are opened by their names in epoch
// e-1, which the kernel knows already (a sample is one inode in every epoch), so that no
// name of epoch e is looked up out of the readers' order.
func dropSome(b *testing.B, dir, root string, e, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	prev := filepath.Join(dir, "all", fmt.Sprintf("epoch-%d", e-1))
	names, _ := fileList(b, prev)
	byOrig := make(map[string]string, len(names))
	for _, name := range names {
		byOrig[origName(name)] = name
	}
	next, _ := fileList(b, filepath.Join(dir, "all", fmt.Sprintf("epoch-%d", e)))
	r := rand.New(rand.NewPCG(uint64(e), 0))
	for _, k := range r.Perm(len(next))[:n] {
		orig := origName(next[k])
		for _, p := range []string{filepath.Join(prev, byOrig[orig]), filepath.Join(root, orig)} {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
			if err != nil {
				b.Fatalf("drop the pages of %s: %v", p, err)
			}
		}
	}
}

// databaseCPU is the CPU time the Cassandra nodes running on this machine, on the cores the
// readers use too, have used so far serving (0 where none runs here): without their JIT
// compilers' (see jvmCPU), which databaseJIT is.
func databaseCPU(b *testing.B) time.Duration {
	b.Helper()
	var serving time.Duration
	for _, pid := range databaseNodes(b) {
		serving += nodeCPU(b, pid)
	}
	return serving
}

// databaseJIT is the CPU time the JIT compilers of the Cassandra nodes running on this
// machine have used so far.
func databaseJIT(b *testing.B) time.Duration {
	b.Helper()
	var jit time.Duration
	for _, pid := range databaseNodes(b) {
		_, j := jvmCPU(b, pid)
		jit += j
	}
	return jit
}

// databaseNodes is the process ids of the Cassandra nodes running on this machine.
func databaseNodes(b *testing.B) []int {
	b.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, c := range cmdlines {
		data, err := os.ReadFile(c)
		if err != nil {
			continue // the process ended meanwhile
		}
		if !bytes.Contains(data, []byte("org.apache.cassandra.service.CassandraDaemon")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c)))
		if err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitQuiet waits, a minute at most, for a second in which the machine's CPUs were busy
// less than a tenth of the time: after a dataset is ingested the database flushes and
// compacts for tens of seconds, on the cores the passes measured next need.
func waitQuiet(b *testing.B) {
	b.Helper()
	busy := func() (busy, total uint64) {
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			b.Fatal(err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		for k, f := range strings.Fields(line)[1:] {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				b.Fatalf("/proc/stat: %v", err)
			}
			total += v
			if k != 3 && k != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		b0, t0 := busy()
		time.Sleep(time.Second)
		if b1, t1 := busy(); 10*(b1-b0) < t1-t0 {
			return
		}
	}
	b.Log("the machine stayed busy for a minute: measuring anyway")
}

// epochFiles is the paths of epoch e of the mount at dir's "all" split, in file_list order.
func epochFiles(b *testing.B, dir string, e int) []string {
	b.Helper()
	epoch := filepath.Join(dir, "all", fmt.Sprintf("epoch-%d", e))
	names, _ := fileList(b, epoch)
	paths := make([]string, len(names))
	for k, n := range names {
		paths[k] = filepath.Join(epoch, n)
	}
	return paths
}

// treeSums is the SHA-256 of every file under root, counted.
func treeSums(b *testing.B, root string) map[[32]byte]int {
	b.Helper()
	var paths []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasSuffix(p, ".txt") {
			paths = append(paths, p)
		}
		return nil
	})
	return epochSums(b, paths)
}

// epochSums is the SHA-256 of every file of paths, counted.
func epochSums(b *testing.B, paths []string) map[[32]byte]int {
	b.Helper()
	sums := map[[32]byte]int{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		sums[sha256.Sum256(data)]++
	}
	return sums
}

// memCgroup is a memory cgroup made for a benchmark, under this process's own, with a
// limit: v1 (memory.limit_in_bytes) or v2 (memory.max), whichever the machine has.
type memCgroup struct {
	dir string
	v2  bool
}

// cgroups counts the cgroups newMemCgroup made, to name each anew.
var cgroups int

// newMemCgroup makes a memory cgroup of limit bytes; it is removed when the benchmark ends.
func newMemCgroup(b *testing.B, limit int64) *memCgroup {
	b.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	var cg *memCgroup
	for _, line := range strings.Split(string(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if strings.Contains(","+parts[1]+",", ",memory,") {
			cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", parts[2])}
			break
		}
		if parts[0] == "0" && parts[1] == "" {
			cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup", parts[2]), v2: true}
		}
	}
	if cg == nil {
		b.Skip("no memory cgroup to make a limited one under")
	}
	cgroups++
	cg.dir = filepath.Join(cg.dir, fmt.Sprintf("cassfs-bench-%d-%d", os.Getpid(), cgroups))
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		b.Fatalf("make a memory cgroup (needs root): %v", err)
	}
	b.Cleanup(func() { os.Remove(cg.dir) })
	file := "memory.limit_in_bytes"
	if cg.v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		b.Fatalf("limit the memory cgroup %s: %v (with cgroup v2, the memory controller must be enabled for its parent)", cg.dir, err)
	}
	return cg
}

// peak is the most memory the cgroup was charged.
func (c *memCgroup) peak(b *testing.B) int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		b.Fatalf("%s: %v", file, err)
	}
	return n
}

// oomKills is how many processes of the cgroup the kernel killed for memory.
func (c *memCgroup) oomKills(b *testing.B) int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("%s: %v", file, err)
			}
			return n
		}
	}
	return 0
}

// startMountIn starts cassfs mount as startMountAt does, in cgroup cg from its first
// instruction (a shell joins the cgroup and execs it).
func startMountIn(b *testing.B, cg *memCgroup, dir, dataset string, args ...string) *mounted {
	b.Helper()
	return startMountWith(b, dir, dataset, func(cmd *exec.Cmd) {
		script := `echo $$ > "$0" && exec "$@"`
		cmd.Args = append([]string{"sh", "-c", script, filepath.Join(cg.dir, "cgroup.procs")}, cmd.Args...)
		cmd.Path = "/bin/sh"
	}, args...)
}
