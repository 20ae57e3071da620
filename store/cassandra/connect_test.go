package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// connectError names the likely cause and its remedy from the driver's flattened text.
func TestConnectErrorSaysWhatToCheck(t *testing.T) {
	const startup = "gocql: unable to create session: unable to connect to initial hosts: gocql: no response to connection startup within timeout"
	tlsNoCert := Config{Hosts: []string{"db:9042"}, TLS: &TLSConfig{CAFile: "ca.pem"}}
	withCert := Config{Hosts: []string{"db:9042"}, TLS: &TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
		want string
	}{
		{"certificate required", tlsNoCert, "remote error: tls: certificate required", "the cluster requires a client certificate: give --tls-cert and --tls-key"},
		{"start-up unanswered over TLS without a certificate", tlsNoCert, startup, "if the cluster requires a client certificate, give --tls-cert and --tls-key"},
		{"start-up unanswered with a certificate", withCert, startup, "is it running and reachable? see --hosts"},
		{"closed at once without TLS", Config{Hosts: []string{"db:9042"}}, "EOF", "does the cluster require TLS"},
	} {
		got := connectError(tc.cfg, errors.New(tc.err)).Error()
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "db:9042") {
			t.Errorf("%s: %q, want it to name db:9042 and say %q", tc.name, got, tc.want)
		}
	}
	if got := connectError(withCert, errors.New(startup)).Error(); strings.Contains(got, "client certificate") {
		t.Errorf("with a client certificate given: %q blames a missing one", got)
	}
}

// recorder is a gocql.StdLogger that keeps what it was given.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) Print(v ...any)                 { r.add(fmt.Sprint(v...)) }
func (r *recorder) Printf(format string, v ...any) { r.add(fmt.Sprintf(format, v...)) }
func (r *recorder) Println(v ...any)               { r.add(fmt.Sprintln(v...)) }
func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

// TestDriverLogsToItsStoresLogger: the driver's messages about a store's session go to
// that store's Config.Logger, at Warn, and not to another store's nor to the driver's
// process-wide logger. Each store is pointed at a port nobody listens on, so the driver
// logs its failed dial and Open fails without a database.
func TestDriverLogsToItsStoresLogger(t *testing.T) {
	global := &recorder{}
	defer func(l gocql.StdLogger) { gocql.Logger = l }(gocql.Logger)
	gocql.Logger = global
	var addrs [2]string
	for k := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[k] = ln.Addr().String()
		ln.Close()
	}
	var logs [2]bytes.Buffer
	for k, addr := range addrs {
		cfg := Config{Hosts: []string{addr}, Dataset: "ds", ConnectTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs[k], nil))}
		if st, err := Open(context.Background(), cfg); err == nil {
			st.Close()
			t.Fatalf("Open at %s, where nobody listens, succeeded", addr)
		}
	}
	for k, addr := range addrs {
		got := logs[k].String() // the driver names a host as "IP:port:"
		if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "from=gocql") || !strings.Contains(got, addr+":") {
			t.Errorf("store %d's logger got %q, want the driver's warning about %s", k, got, addr)
		}
		if strings.Contains(got, addrs[1-k]+":") {
			t.Errorf("store %d's logger got the other store's messages (%s): %q", k, addrs[1-k], got)
		}
	}
	if len(global.got) != 0 {
		t.Errorf("the driver's process-wide logger got %q, want nothing", global.got)
	}
}
