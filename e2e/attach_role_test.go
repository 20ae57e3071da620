//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocql/gocql"
	"github.com/google/uuid"
)

// TestAttachWithSelectOnlyRole attaches and mounts a table as a role that may only SELECT
// in the table's keyspace (and do anything in the catalogue's, made for it beforehand), on
// a node that enforces permissions: attach and mount need nothing more, and the table's rows stay as
// they were.
func TestAttachWithSelectOnlyRole(t *testing.T) {
	n := startSecureNode(t, "CASSFS_CASSANDRA_AUTHZ=1")
	const user, password = "reader", "R3ad-only!"
	src := t.TempDir()
	if r := cassfs(t, "gen", "--out", src, "--count", "16", "--classes", "2", "--mean-size", "4000", "--progress", "none"); r.code != 0 {
		t.Fatal(r)
	}
	root := filepath.Join(src, "images")
	d := sourceTree(t, root)

	s := n.session(t)
	defer s.Close()
	for _, q := range []string{
		`CREATE KEYSPACE theirs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`CREATE TABLE theirs.data_train (id uuid, label int, data blob, PRIMARY KEY ((id)))`,
		`CREATE ROLE ` + user + ` WITH PASSWORD = '` + password + `' AND LOGIN = true`,
		`GRANT SELECT ON KEYSPACE theirs TO ` + user,
		// The catalogue's keyspace, made for the role, which may do anything there.
		`CREATE KEYSPACE mine WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`GRANT ALL PERMISSIONS ON KEYSPACE mine TO ` + user,
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for label, c := range classesOf(t, root) {
		files, err := os.ReadDir(filepath.Join(root, c))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(root, c, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			id := gocql.UUID(uuid.New())
			if err := s.Query(`INSERT INTO theirs.data_train (id, label, data) VALUES (?, ?, ?)`, id, label, data).Exec(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows := func() (n int, newest int64) {
		t.Helper()
		iter := s.Query(`SELECT writetime(data) FROM theirs.data_train`).Iter()
		var w int64
		for iter.Scan(&w) {
			n, newest = n+1, max(newest, w)
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		return n, newest
	}
	n0, w0 := rows()

	os.Setenv("CASSFS_PASSWORD", password)
	defer os.Unsetenv("CASSFS_PASSWORD")
	flags := []string{"--hosts", n.host, "--tls-ca", filepath.Join(n.tls, "ca.pem"),
		"--tls-cert", filepath.Join(n.tls, "client.pem"), "--tls-key", filepath.Join(n.tls, "client.key"), "--username", user}
	// The role cannot write where it attaches: the check is the node's, not cassfs's.
	r := cassfs(t, append([]string{"ingest", "-d", "theirs", "--progress", "none", root}, flags...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "permission") {
		t.Errorf("ingest into the attached keyspace as the SELECT-only role: %s; want a refused permission", r)
	}
	r = cassfs(t, append([]string{"dataset", "attach", "mine", "--progress", "none", "--data-table", "theirs.data_train"}, flags...)...)
	if r.code != 0 {
		t.Fatalf("attach as a SELECT-only role: %s", r)
	}
	m := startMount(t, "mine", flags...)
	classes := classesOf(t, root)
	_, items := readDALI(t, d, "--file-root", filepath.Join(m.dir, "all", "epoch-0"))
	eachOnce(t, d, classes, "DALI through a mount as a SELECT-only role", items)
	m.stop(t)
	if n1, w1 := rows(); n1 != n0 || w1 != w0 {
		t.Errorf("the attached table after attach and mount: %d rows, newest write %d; before %d, %d", n1, w1, n0, w0)
	}
}
