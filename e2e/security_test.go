//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/gocql/gocql"
)

// secureNode is a one-node Cassandra that requires mutual TLS and a login, on 127.0.0.21.
type secureNode struct {
	host, tls string // address; directory of ca.pem, client.pem, client.key
}

func startSecureNode(t *testing.T, env ...string) *secureNode {
	t.Helper()
	// CASSFS_TEST_LOCAL_NODES=1: the external cluster is on this machine, which may start
	// nodes of its own beside it.
	if os.Getenv("CASSFS_TEST_HOSTS") != "" && os.Getenv("CASSFS_TEST_LOCAL_NODES") == "" {
		t.Skip("starts a local node configured for TLS and passwords; not run against an external cluster (unless CASSFS_TEST_LOCAL_NODES=1)")
	}
	dir := t.TempDir()
	env = append(append(os.Environ(), env...), "CASSFS_CASSANDRA_DIR="+dir, "CASSFS_CASSANDRA_IP_BASE=20", "CASSFS_CASSANDRA_SECURE=1", "CASSANDRA_HEAP=1G")
	run := func(args ...string) {
		cmd := exec.Command("./cassandra.sh", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cassandra.sh %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { run("wipe") })
	run("start", "1")
	return &secureNode{host: "127.0.0.21:9042", tls: filepath.Join(dir, "tls")}
}

// session logs in as the default superuser over TLS, waiting for the node to have made it.
func (n *secureNode) session(t *testing.T) *gocql.Session {
	t.Helper()
	cl := gocql.NewCluster(n.host)
	cl.ProtoVersion = 4
	cl.Timeout = 20 * time.Second
	cl.SslOpts = &gocql.SslOptions{CaPath: filepath.Join(n.tls, "ca.pem"), CertPath: filepath.Join(n.tls, "client.pem"),
		KeyPath: filepath.Join(n.tls, "client.key"), EnableHostVerification: true}
	cl.Authenticator = gocql.PasswordAuthenticator{Username: "cassandra", Password: "cassandra"}
	// The default superuser is made shortly after the node listens.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		s, err := cl.CreateSession()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("log in to the secure node: %v", err)
		}
	}
}

// otherCA writes a CA certificate that signed nothing the node has.
func otherCA(t *testing.T) string {
	t.Helper()
	key := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	return p
}

// TestTLSAndPasswords: against a node requiring mutual TLS and a login, cassfs ingests and
// mounts with --tls-ca/--tls-cert/--tls-key and a password from the environment or a
// file; a wrong password, a wrong CA, a missing client certificate, no TLS at all, and a
// password file others can read fail with messages that say what to fix. The password
// appears in no output or log.
func TestTLSAndPasswords(t *testing.T) {
	n := startSecureNode(t)
	const user, password = "trainer", "S3cret-pass!"
	s := n.session(t)
	if err := s.Query(`CREATE ROLE IF NOT EXISTS ` + user + ` WITH PASSWORD = '` + password + `' AND LOGIN = true`).Exec(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	passFile := filepath.Join(t.TempDir(), "password")
	os.WriteFile(passFile, []byte(password+"\n"), 0o600)
	tlsFlags := []string{"--hosts", n.host, "--tls-ca", filepath.Join(n.tls, "ca.pem"),
		"--tls-cert", filepath.Join(n.tls, "client.pem"), "--tls-key", filepath.Join(n.tls, "client.key"), "--username", user}
	withEnv := func(env string, args ...string) result {
		t.Helper()
		os.Setenv("CASSFS_PASSWORD", env)
		defer os.Unsetenv("CASSFS_PASSWORD")
		r := cassfs(t, args...)
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("cassfs %v printed the password:\n%s", args, r)
		}
		return r
	}

	src := t.TempDir()
	if r := cassfs(t, "gen", "--out", src, "--count", "20", "--mean-size", "5000", "--progress", "none"); r.code != 0 {
		t.Fatal(r)
	}
	r := withEnv(password, append([]string{"ingest", "-d", "secure", "--progress", "none", filepath.Join(src, "images")}, tlsFlags...)...)
	if r.code != 0 {
		t.Fatalf("ingest over TLS with a login: %s", r)
	}

	m := startMount(t, "secure", append(tlsFlags, "--password-file", passFile)...)
	want := testkit.Must(os.ReadFile(filepath.Join(src, "images", "class_000", mustFirst(t, filepath.Join(src, "images", "class_000")))))(t)
	list, _ := fileList(t, filepath.Join(m.dir, "all", "epoch-0"))
	read := 0
	for _, p := range list {
		data, err := os.ReadFile(filepath.Join(m.dir, "all", "epoch-0", p))
		if err != nil {
			t.Fatalf("read through a TLS mount: %v", err)
		}
		if sha(data) == sha(want) {
			read++
		}
	}
	if read != 1 {
		t.Errorf("the mount served the known file %d times in an epoch, want once", read)
	}
	if strings.Contains(m.stderr.String(), password) {
		t.Errorf("the mount logged the password; %s", m.log())
	}

	base := []string{"split", "list", "-d", "secure", "--timeout", "5s"}
	for _, tc := range []struct {
		name  string
		env   string
		flags []string
		code  int
		want  string
	}{
		{"wrong password", "wrong", tlsFlags, 1, `login as "trainer" refused: check the password`},
		{"no login", "", tlsFlags[:len(tlsFlags)-2], 1, "the cluster requires a login"},
		{"wrong CA", password, replaceFlag(tlsFlags, "--tls-ca", otherCA(t)), 1, "not signed by a CA in --tls-ca"},
		{"no client certificate", password, []string{"--hosts", n.host, "--tls-ca", filepath.Join(n.tls, "ca.pem"), "--username", user}, 1, "requires a client certificate"},
		{"no TLS", password, []string{"--hosts", n.host, "--username", user}, 1, "does the cluster require TLS"},
		{"password file readable by others", "", append(slices.Clone(tlsFlags), "--password-file", worldReadable(t, password)), 2, "chmod 600"},
	} {
		r := withEnv(tc.env, append(slices.Clone(base), tc.flags...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: got %s\nwant exit %d and %q", tc.name, r, tc.code, tc.want)
		}
	}
	if r := withEnv("", append(slices.Clone(base), append(slices.Clone(tlsFlags), "--password-file", passFile)...)...); r.code != 0 {
		t.Errorf("split list with --password-file: %s", r)
	}
}

func mustFirst(t *testing.T, dir string) string {
	t.Helper()
	e, err := os.ReadDir(dir)
	if err != nil || len(e) == 0 {
		t.Fatalf("read %s: %v", dir, err)
	}
	return e[0].Name()
}

func replaceFlag(flags []string, name, value string) []string {
	out := slices.Clone(flags)
	for k := range out {
		if out[k] == name {
			out[k+1] = value
		}
	}
	return out
}

func worldReadable(t *testing.T, password string) string {
	p := filepath.Join(t.TempDir(), "password")
	os.WriteFile(p, []byte(password), 0o644)
	return p
}
