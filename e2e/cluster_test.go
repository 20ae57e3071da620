//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/gocql/gocql"
)

// cluster is a three-node Cassandra started by cassandra.sh beside the suite's node, on
// 127.0.0.11-13 with a data directory of its own.
type cluster struct {
	hosts []string
	env   []string
}

func (c *cluster) script(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("./cassandra.sh", args...)
	cmd.Env = append(os.Environ(), c.env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cassandra.sh %v: %v\n%s", args, err, out)
	}
	t.Logf("cassandra.sh %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
}

// pid is node i's process id.
func (c *cluster) pid(t testing.TB, i int) int {
	t.Helper()
	cmd := exec.Command("./cassandra.sh", "status")
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output()
	m := regexp.MustCompile(fmt.Sprintf(`node %d: running \(pid (\d+)\)`, i)).FindSubmatch(out)
	if m == nil {
		t.Fatalf("node %d is not running (cassandra.sh status: %v):\n%s", i, err, out)
	}
	pid := testkit.Must(strconv.Atoi(string(m[1])))(t)
	return pid
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	if os.Getenv("CASSFS_TEST_HOSTS") != "" {
		t.Skip("starts and stops a local three-node cluster; not run against an external cluster")
	}
	c := &cluster{env: []string{"CASSFS_CASSANDRA_DIR=" + t.TempDir(), "CASSFS_CASSANDRA_IP_BASE=10"}}
	for i := 1; i <= 3; i++ {
		c.hosts = append(c.hosts, fmt.Sprintf("127.0.0.%d:9042", 10+i))
	}
	t.Cleanup(func() { c.script(t, "wipe") })
	c.script(t, "start", "3")
	return c
}

// reader reads files one after another at a steady pace until stopped, recording every
// error and the slowest read.
type reader struct {
	stop    chan struct{}
	done    chan struct{}
	reads   atomic.Int64
	mu      sync.Mutex
	errs    []error
	slowest time.Duration
}

func startReader(paths []string, every time.Duration) *reader {
	r := &reader{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for _, p := range paths {
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			_, err := os.ReadFile(p)
			took := time.Since(start)
			r.reads.Add(1)
			r.mu.Lock()
			if err != nil {
				r.errs = append(r.errs, fmt.Errorf("%s after %v: %w", filepath.Base(p), took, err))
			}
			r.slowest = max(r.slowest, took)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *reader) finish() (int64, []error, time.Duration) {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads.Load(), r.errs, r.slowest
}

// clusterTimeout is the --timeout of the mounts that see one node of three stop or freeze,
// and stallBound the longest a read may take meanwhile: the retry on another replica, or
// the hedge after --speculative-after 1s, answers well within it, while a read that waited
// for the stopped node would take the whole deadline. Seconds of margin on both sides keep
// the bound true on a two-core machine shared with three nodes.
const (
	clusterTimeout = 10 * time.Second
	stallBound     = 5 * time.Second
)

// waitReads waits until the reader has made n reads in all, failing the test after within.
func waitReads(t *testing.T, r *reader, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for r.reads.Load() < n {
		select {
		case <-r.done:
			t.Fatalf("the steady reader ran out of files after %d reads, want %d: the steps around it took longer than its files last", r.reads.Load(), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the steady reader made %d reads in %v, want %d", r.reads.Load(), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterNodeFailure: replication factor 3; while DALI reads an epoch and another
// reader reads steadily, node 2 stops and comes back: no reader sees an error, no read
// stalls beyond stallBound. The same when node 2 freezes for 6 s. With every node down,
// reads fail with EIO within the deadline, the mount stays up, and reading resumes when
// the cluster is back.
func TestClusterNodeFailure(t *testing.T) {
	c := startCluster(t)
	t.Run("BlocksGoToTheirOwners", func(t *testing.T) { testBlocksGoToTheirOwners(t, c) })
	d, err := generate(t, t.TempDir(), "cluster_rf3", c.hosts, "--count", "2400", "--classes", "3", "--mean-size", "8000", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	// A small cache and no page cache help (each sample is read once by each reader) keep
	// the readers going to the database throughout.
	m := startMount(t, d.name, "--hosts", strings.Join(c.hosts, ","), "--timeout", clusterTimeout.String(), "--cache-size", "4MiB")
	steady, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-1"))
	for k := range steady {
		steady[k] = filepath.Join(m.dir, "all", "epoch-1", steady[k])
	}
	// ~50 files/s: 48 s of new samples, beyond what the steps below take (a run at ~80
	// files/s once ran out of files before node 2 was back: its stop and start took 26 s).
	rd := startReader(steady, 20*time.Millisecond)

	py := python(t)
	var dali daliOut
	daliDone := make(chan error, 1)
	go func() {
		daliDone <- pythonScript(py, &dali, "dali_read.py", "--file-list", filepath.Join(m.dir, "all", "epoch-0", "file_list.txt"), "--step-seconds", "0.03")
	}()
	waitReads(t, rd, 100, time.Minute) // both readers under way
	c.script(t, "stop", "2")
	if err := <-daliDone; err != nil {
		t.Fatalf("DALI while node 2 stopped: %v", err)
	}
	var items []readSample
	for _, s := range dali.Samples {
		items = append(items, readSample{d.byHash[s.SHA256], s.Label})
	}
	expectEachOnce(t, d, "DALI with node 2 stopping", items)
	c.script(t, "startnode", "2")
	waitReads(t, rd, rd.reads.Load()+200, time.Minute) // reads go to node 2 again
	reads, errs, slowest := rd.finish()
	t.Logf("steady reader: %d reads, %d errors, slowest %v", reads, len(errs), slowest)
	for _, err := range errs {
		t.Errorf("read while node 2 stopped or started: %v", err)
	}
	if slowest > stallBound {
		t.Errorf("slowest read %v while node 2 stopped or started, want under %v", slowest, stallBound)
	}
	if reads < 500 {
		t.Errorf("the steady reader made only %d reads", reads)
	}
	if strings.Contains(m.stderr.String(), "I/O error") {
		t.Errorf("the mount logged I/O errors with one node of three down; %s", m.log())
	}

	// A frozen node (SIGSTOP: connections open, nothing answers) for 6 s: reads it
	// coordinates are hedged after 1 s to another replica instead of waiting out the 5 s
	// deadline, names streamed ahead included. A new mount, so that the kernel has none of these files cached.
	mf := startMount(t, d.name, "--hosts", strings.Join(c.hosts, ","), "--timeout", clusterTimeout.String(), "--cache-size", "4MiB", "--metrics-addr", "127.0.0.1:0")
	frozen, _ := fileList(t, filepath.Join(mf.dir, "all", "epoch-3"))
	for k := range frozen {
		frozen[k] = filepath.Join(mf.dir, "all", "epoch-3", frozen[k])
	}
	rd = startReader(frozen, 12*time.Millisecond)
	waitReads(t, rd, 50, time.Minute)
	pid := c.pid(t, 2)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second) // the disturbance: 6 s frozen
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitReads(t, rd, rd.reads.Load()+100, time.Minute) // reading goes on past the thaw
	reads, errs, slowest = rd.finish()
	body := scrape(t, metricsURL(t, mf))
	hedges, _ := metricValue(body, "cassfs_fetch_hedges_total")
	blockHedges, _ := metricValue(body, "cassfs_fetch_block_hedges_total")
	chunks, _ := metricValue(body, `cassfs_fuse_requests_total\{op="readdirplus"\}`)
	t.Logf("steady reader with node 2 frozen: %d reads, %d errors, slowest %v; %v reads hedged, %v samples of blocks waited for past 1 s; %v READDIRPLUS", reads, len(errs), slowest, hedges, blockHedges, chunks)
	for _, err := range errs {
		t.Errorf("read while node 2 was frozen: %v", err)
	}
	if slowest > stallBound {
		t.Errorf("slowest read %v while node 2 was frozen, want under %v", slowest, stallBound)
	}
	if hedges == 0 {
		t.Error("no read was hedged while node 2 was frozen")
	}
	// Names streamed ahead (the default over a fast link) are bound to their samples in
	// fetch order, a stuck one's too: the hedge's second attempt must ask another replica.
	if chunks == 0 {
		t.Error("no class directory was streamed: the frozen replica was not met by names bound ahead")
	}

	// Every node down: EIO within the 5 s deadline, listings still work. A second mount
	// (its own page cache, no prefetching, names fixed to samples) has nothing cached.
	m2 := startMount(t, d.name, "--hosts", strings.Join(c.hosts, ","), "--timeout", "5s", "--prefetch", "0", "--order", "strict")
	root := filepath.Join(m2.dir, "all", "epoch-7")
	fresh, _ := fileList(t, root)
	c.script(t, "stop")
	for _, p := range fresh[:3] {
		start := time.Now()
		_, err := os.ReadFile(filepath.Join(root, p))
		took := time.Since(start)
		t.Logf("read with every node down: %v after %v", err, took)
		if !errors.Is(err, syscall.EIO) || took > 10*time.Second {
			t.Errorf("read with every node down: %v after %v, want EIO within the 5s deadline (plus slack)", err, took)
		}
	}
	if _, err := os.ReadDir(filepath.Join(root, d.ix.Labels()[0])); err != nil {
		t.Errorf("listing with every node down: %v", err)
	}
	c.script(t, "startnode", "1", "2", "3")
	deadline := time.Now().Add(time.Minute)
	for k := 3; ; k++ {
		data, err := os.ReadFile(filepath.Join(root, fresh[k]))
		if err == nil {
			if sha(data) != d.sha[origName(fresh[k])] {
				t.Fatal("read after recovery returned wrong bytes")
			}
			t.Logf("reading resumed %d reads after the cluster was back", k-2)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads still fail a minute after the cluster is back: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// testBlocksGoToTheirOwners: a dataset with one replica of each blob, spread over the three
// nodes, read cold through a mount in blocks: every block goes to the node that owns all
// its ids, so no node reads a blob from another. The nodes' internode traffic while the
// epoch is read (system_views.internode_outbound, each node's own) stays a small part of
// the bytes read; a block sent to any node would make two thirds of them cross between
// nodes. Every sample is read once with its label.
func testBlocksGoToTheirOwners(t *testing.T, c *cluster) {
	d, err := generate(t, t.TempDir(), "cluster_rf1", c.hosts[:1], "--count", "600", "--classes", "3", "--mean-size", "20000", "--seed", "13")
	if err != nil {
		t.Fatal(err)
	}
	m := startMount(t, d.name, "--hosts", strings.Join(c.hosts, ","), "--timeout", clusterTimeout.String(), "--metrics-addr", "127.0.0.1:0")
	url := metricsURL(t, m)
	sent := func() int64 {
		var total int64
		for _, h := range c.hosts {
			cl := gocql.NewCluster(h)
			cl.HostFilter = gocql.WhiteListHostFilter(h)
			cl.Timeout = clusterTimeout
			s, err := cl.CreateSession()
			if err != nil {
				t.Fatalf("connect to %s: %v", h, err)
			}
			iter := s.Query(`SELECT sent_bytes FROM system_views.internode_outbound`).Iter()
			var n int64
			for iter.Scan(&n) {
				total += n
			}
			err = iter.Close()
			s.Close()
			if err != nil {
				t.Fatalf("%s: system_views.internode_outbound: %v", h, err)
			}
		}
		return total
	}
	before := sent()
	expectEachOnce(t, d, "epoch 0 of a dataset with one replica", readEpochGo(t, d, filepath.Join(m.dir, "all", "epoch-0"), 4))
	crossed := sent() - before
	read := treeBytes(t, d.root)
	body := scrape(t, url)
	blocks, _ := metricValue(body, "cassfs_fetch_blocks_total")
	inBlocks, _ := metricValue(body, "cassfs_fetch_block_samples_total")
	t.Logf("%d bytes between nodes while %d were read; %v samples in %v blocks", crossed, read, inBlocks, blocks)
	if inBlocks < 300 {
		t.Errorf("%v of 600 samples read in blocks, want most of them", inBlocks)
	}
	if crossed > read/10 {
		t.Errorf("%d bytes crossed between nodes while %d were read: blocks went to nodes not owning their ids", crossed, read)
	}
}
