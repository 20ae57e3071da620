//go:build e2e

// Package e2e holds the end-to-end tests: a real Apache Cassandra started by cassandra.sh,
// the built cassfs binary, and (from the filesystem on) real mounts and readers.
//
// Run with "make e2e". TestMain starts Cassandra unless CASSFS_TEST_HOSTS names a running
// cluster, and builds the binary once. Each test works in a dataset of its own, dropped at
// the end, so tests share one node without seeing each other's data.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/gocql/gocql"
)

var (
	hosts     []string // Cassandra contact points
	cassfsBin string   // the built binary
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "cassfs-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	cassfsBin = filepath.Join(tmp, "cassfs")
	// Built without -race: the binary encodes thousands of images in these tests, ~10x
	// slower under the race detector; its concurrency is covered by -race unit tests.
	if out, err := exec.Command("go", "build", "-o", cassfsBin, "../cmd/cassfs").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build cassfs: %v\n%s", err, out)
		return 1
	}
	if h := os.Getenv("CASSFS_TEST_HOSTS"); h != "" {
		hosts = strings.Split(h, ",")
	} else {
		hosts = []string{"127.0.0.1:9042"}
		// A node the user started (make demo, make cassandra-start) is reused and left running.
		wasRunning := exec.Command("./cassandra.sh", "status").Run() == nil
		cmd := exec.Command("./cassandra.sh", "start", "1")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "start Cassandra: %v\n", err)
			return 1
		}
		if !wasRunning && os.Getenv("CASSFS_KEEP_CASSANDRA") == "" {
			defer func() {
				cmd := exec.Command("./cassandra.sh", "stop")
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				cmd.Run()
			}()
		}
	}
	code := m.Run()
	if shared != nil {
		dropKeyspace(shared.name)
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	return code
}

// newDataset returns a fresh dataset name and drops the dataset when the test ends.
func newDataset(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if err := dropKeyspace(name); err != nil {
			t.Errorf("drop dataset %s: %v", name, err)
		}
	})
	return name
}

func dropKeyspace(name string) error { return dropKeyspaceOn(hosts, name) }

func dropKeyspaceOn(hosts []string, name string) error {
	cl := gocql.NewCluster(hosts...)
	cl.ProtoVersion = 4
	cl.Timeout = time.Minute
	s, err := cl.CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Query("DROP KEYSPACE IF EXISTS " + name).Exec()
}

// cql opens a plain session for checks behind cassfs's back.
func cql(t testing.TB, keyspace string) *gocql.Session {
	t.Helper()
	cl := gocql.NewCluster(hosts...)
	cl.Keyspace = keyspace
	cl.ProtoVersion = 4
	cl.Timeout = 20 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("connect to Cassandra: %v", err)
	}
	return s
}

// openStore opens a dataset through the store package.
func openStore(t testing.TB, dataset string, create bool) *cassandra.Store {
	t.Helper()
	st, err := cassandra.Open(context.Background(), cassandra.Config{
		Hosts: hosts, Dataset: dataset, Create: create, Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("open dataset %s: %v", dataset, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cassfs runs the binary against the test cluster.
func cassfs(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cassfsBin, args...)
	cmd.Env = append(os.Environ(), "CASSFS_HOSTS="+strings.Join(hosts, ","))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run cassfs %v: %v", args, err)
	}
	return r
}
