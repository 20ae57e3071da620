package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
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

// fixedPolicy picks its hosts in the order of orders[k] for its k-th query, as the
// token-aware policy's shuffle might.
type fixedPolicy struct {
	gocql.HostSelectionPolicy
	mu     sync.Mutex
	orders [][]*gocql.HostInfo
}

type pickedHost struct{ h *gocql.HostInfo }

func (p pickedHost) Info() *gocql.HostInfo { return p.h }
func (pickedHost) Mark(error)              {}

func (p *fixedPolicy) Pick(gocql.ExecutableQuery) gocql.NextHost {
	p.mu.Lock()
	order := p.orders[0]
	p.orders = p.orders[1:]
	p.mu.Unlock()
	return func() gocql.SelectedHost {
		if len(order) == 0 {
			return nil
		}
		h := order[0]
		order = order[1:]
		return pickedHost{h}
	}
}

// The attempts of one hedged read ask different replicas first, whatever the shuffle; a
// read without store.Attempts keeps the policy's order.
func TestHedgedAttemptsAskAnotherReplica(t *testing.T) {
	hosts := make([]*gocql.HostInfo, 3)
	for k := range hosts {
		hosts[k] = &gocql.HostInfo{}
		hosts[k].SetHostID(fmt.Sprintf("node-%d", k+1))
	}
	a, b, c := hosts[0], hosts[1], hosts[2]
	pol := &fixedPolicy{orders: [][]*gocql.HostInfo{{a, b, c}, {a, c, b}, {a, b, c}}}
	r := routing{HostSelectionPolicy: pol}
	// asks lists the hosts a query with ctx would ask, in order, its first n.
	asks := func(ctx context.Context, n int) []string {
		var ids []string
		next := r.Pick((&gocql.Query{}).WithContext(ctx))
		for len(ids) < n {
			h := next()
			if h == nil {
				break
			}
			ids = append(ids, h.Info().HostID())
		}
		return ids
	}
	ctx := store.WithAttempts(context.Background(), new(store.Attempts))
	if got := asks(ctx, 1); !slices.Equal(got, []string{"node-1"}) { // answered by its first
		t.Fatalf("first attempt asked %v, want node-1", got)
	}
	// The hedge: the shuffle put node-1 first again.
	if got, want := asks(ctx, 3), []string{"node-3", "node-2", "node-1"}; !slices.Equal(got, want) {
		t.Errorf("second attempt of the read asks %v, want %v (the first attempt's replica last)", got, want)
	}
	if got, want := asks(context.Background(), 3), []string{"node-1", "node-2", "node-3"}; !slices.Equal(got, want) {
		t.Errorf("a read not hedged asks %v, want the policy's order %v", got, want)
	}
}

// The session's shortest answer is kept: failures and slower answers do not raise it.
func TestRoundTripIsTheShortestAnswer(t *testing.T) {
	var r roundTrips
	c := &Store{roundTrips: &r}
	at := time.Unix(1000, 0)
	observe := func(took time.Duration, err error) {
		r.ObserveQuery(context.Background(), gocql.ObservedQuery{Start: at, End: at.Add(took), Err: err})
	}
	if got := c.RoundTrip(); got != 0 {
		t.Fatalf("before any answer: %v, want 0", got)
	}
	for _, q := range []struct {
		took time.Duration
		err  error
		want time.Duration
	}{
		{30 * time.Millisecond, nil, 30 * time.Millisecond},
		{time.Millisecond, errors.New("timed out"), 30 * time.Millisecond},
		{2 * time.Millisecond, nil, 2 * time.Millisecond},
		{200 * time.Millisecond, nil, 2 * time.Millisecond},
	} {
		observe(q.took, q.err)
		if got := c.RoundTrip(); got != q.want {
			t.Errorf("after an answer in %v (error %v): %v, want %v", q.took, q.err, got, q.want)
		}
	}
}
