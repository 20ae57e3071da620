package cassandra

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
)

// TLSConfig is how connections to the cluster are encrypted.
type TLSConfig struct {
	// CAFile holds the PEM certificates that sign the nodes' certificates (default: the
	// system's roots). Nodes' certificates are always verified, names included.
	CAFile string
	// CertFile and KeyFile, both or neither, are a PEM client certificate and its key, for
	// clusters that require client certificates.
	CertFile, KeyFile string
	// ServerName, if set, is the name node certificates must carry (default: the address
	// connected to).
	ServerName string
}

func (t *TLSConfig) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("a TLS client certificate needs both its certificate and its key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s with key %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// newSession connects to the cluster, with no keyspace: every statement names its tables'
// keyspace (Store.cql). With a session keyspace, gocql 1.7 would fetch that keyspace's
// whole schema for its token-aware replica map before CreateSession returns (session.go,
// init: KeyspaceChanged), and once more per host added: about twenty round trips in
// series, three seconds at 150 ms. The caller asks the returned policy for the replica
// map when it suits it.
// reconnectInterval is how often a node marked down is dialled again. A dial that hangs
// holds the pool's one filling slot, so dials never pile up; each costs a connection attempt.
const reconnectInterval = 250 * time.Millisecond

func newSession(cfg Config) (*gocql.Session, gocql.HostSelectionPolicy, *roundTrips, error) {
	cl := gocql.NewCluster(cfg.Hosts...)
	rt := new(roundTrips)
	cl.QueryObserver = rt
	cl.Port = cfg.Port
	// v1.7.0's protocol v5 support is beta and lacks v5 framing.
	cl.ProtoVersion = 4
	cl.Consistency = gocql.LocalOne
	cl.Timeout = cfg.Timeout
	cl.ConnectTimeout = cfg.ConnectTimeout
	cl.NumConns = cfg.NumConns
	cl.WriteCoalesceWaitTime = cfg.WriteCoalesceWait
	cl.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 2}
	// A node whose connections all failed is dialled again every reconnectInterval, not on
	// gocql's default minute: a mount outlives outages, with every node down nothing else
	// would notice the return, and requests wait for it (again) only within their deadline.
	cl.ReconnectInterval = reconnectInterval
	cl.Logger = driverLogger{cfg.Logger}
	var fallback gocql.HostSelectionPolicy = gocql.RoundRobinHostPolicy()
	if cfg.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(cfg.LocalDC)
	}
	policy := routing{gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas()), fallback}
	cl.PoolConfig.HostSelectionPolicy = policy
	if len(cfg.AddressMap) > 0 {
		cl.AddressTranslator = gocql.AddressTranslatorFunc(func(addr net.IP, port int) (net.IP, int) {
			to, ok := cfg.AddressMap[net.JoinHostPort(addr.String(), strconv.Itoa(port))]
			if !ok {
				return addr, port
			}
			h, p, err := net.SplitHostPort(to)
			ip := net.ParseIP(h)
			pn, perr := strconv.Atoi(p)
			if err != nil || ip == nil || perr != nil {
				return addr, port // validated by the caller; never reached
			}
			return ip, pn
		})
	}
	// Blobs are JPEG/PNG: compression would cost CPU and save nothing.
	cl.Compressor = nil
	if cfg.TLS != nil {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, nil, nil, err
		}
		// EnableHostVerification: gocql otherwise skips verifying the chain as well.
		cl.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: true}
	}
	if cfg.Username != "" {
		cl.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	s, err := cl.CreateSession()
	if err != nil {
		return nil, nil, nil, connectError(cfg, err)
	}
	return s, policy, rt, nil
}

// roundTrips keeps the shortest time any query of a session took to be answered: the
// link's round trip plus the least a node's work can take, measured on the small queries a
// store makes when it opens, before blob reads can queue behind each other (Store.RoundTrip).
type roundTrips struct {
	least atomic.Int64 // nanoseconds; 0 until the first answer
}

// ObserveQuery implements gocql.QueryObserver.
func (r *roundTrips) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	if q.Err != nil {
		return
	}
	d := max(int64(q.End.Sub(q.Start)), 1)
	for {
		least := r.least.Load()
		if least != 0 && least <= d || r.least.CompareAndSwap(least, d) {
			return
		}
	}
}

// routing is gocql's token-aware policy, except for queries whose context says they have no
// partition key (anyNode): those go straight to the fallback policy. For them the
// token-aware policy would look the statement's partition key up in the keyspace's whole
// schema first (gocql 1.7, session.go: routingKeyInfo, when the prepared statement binds no
// partition key column), which is the fetch newSession keeps off the start-up path; the
// answer would be "no routing key" and the same fallback anyway.
type routing struct {
	gocql.HostSelectionPolicy
	fallback gocql.HostSelectionPolicy
}

// anyNode marks the context of a query that binds no partition key (a token-range scan).
type anyNode struct{}

// Pick implements gocql.HostSelectionPolicy. The attempts of one read (store.Attempts: a
// hedged read) ask different replicas first.
func (r routing) Pick(q gocql.ExecutableQuery) gocql.NextHost {
	if q != nil && q.Context().Value(anyNode{}) != nil {
		return r.fallback.Pick(q)
	}
	if q != nil {
		if h, ok := q.Context().Value(pinnedHost{}).(*gocql.HostInfo); ok {
			return pinned(h, r.fallback.Pick(q)) // a block's part: to the node owning its ids
		}
	}
	next := r.HostSelectionPolicy.Pick(q)
	if q != nil {
		if a := store.AttemptsOf(q.Context()); a != nil {
			return unaskedFirst(next, a)
		}
	}
	return next
}

// unaskedFirst yields next's hosts that no other attempt of the read asked, recording each
// as asked, then the others: a second attempt goes to another replica where there is one,
// and to the first one's where there is not. (The token-aware policy shuffles the replicas
// of every query, so without this a hedge asks the stuck replica again one time in RF.)
func unaskedFirst(next gocql.NextHost, a *store.Attempts) gocql.NextHost {
	var later []gocql.SelectedHost
	return func() gocql.SelectedHost {
		for h := next(); h != nil; h = next() {
			if a.Ask(h.Info().HostID()) {
				return h
			}
			later = append(later, h)
		}
		if len(later) == 0 {
			return nil
		}
		h := later[0]
		later = later[1:]
		return h
	}
}

// AddHosts lets gocql add the initial hosts at once, as it does with the token-aware policy.
func (r routing) AddHosts(hosts []*gocql.HostInfo) {
	if bulk, ok := r.HostSelectionPolicy.(interface{ AddHosts([]*gocql.HostInfo) }); ok {
		bulk.AddHosts(hosts)
		return
	}
	for _, h := range hosts {
		r.AddHost(h)
	}
}

// connectError says why a session could not be made, and what to check. The password
// never appears in it.
//
// gocql 1.7 flattens the causes of a failed session into text ("unable to connect to
// initial hosts: %v", control.go; "unable to create session: %v", session.go), so after
// errors.As, the cause is recognised by the messages of crypto/tls, crypto/x509 and
// Cassandra's authenticator.
func connectError(cfg Config, err error) error {
	at := strings.Join(cfg.Hosts, ",")
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr *tls.CertificateVerificationError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &certErr) && errors.As(certErr.Err, &unknownCA),
		strings.Contains(msg, "certificate signed by unknown authority"):
		return fmt.Errorf("connect to Cassandra at %s over TLS: the nodes' certificate is not signed by a CA in --tls-ca (%s): %w", at, cfg.TLS.CAFile, err)
	case errors.As(err, &hostErr), strings.Contains(msg, "certificate is valid for"):
		return fmt.Errorf("connect to Cassandra at %s over TLS: the nodes' certificate does not name the address connected to (set --tls-server-name to the name it carries): %w", at, err)
	case strings.Contains(msg, "Provided username") || strings.Contains(msg, "authentication") || strings.Contains(msg, "Authentication"):
		if cfg.Username == "" {
			return fmt.Errorf("connect to Cassandra at %s: the cluster requires a login: give --username and the password in $CASSFS_PASSWORD or --password-file: %w", at, err)
		}
		return fmt.Errorf("connect to Cassandra at %s: login as %q refused: check the password ($CASSFS_PASSWORD or --password-file): %w", at, cfg.Username, err)
	case strings.Contains(msg, "tls: certificate required"):
		return fmt.Errorf("connect to Cassandra at %s: the cluster requires a client certificate: give --tls-cert and --tls-key: %w", at, err)
	case cfg.TLS != nil && cfg.TLS.CertFile == "" && strings.Contains(msg, "no response to connection startup"):
		// A node that requires a client certificate rejects a connection without one once
		// the handshake ends (TLS 1.3). That usually surfaces as the error above, but it
		// has also been seen as this timeout instead, with the node under load.
		return fmt.Errorf("connect to Cassandra at %s over TLS: no answer to the connection's start-up; if the cluster requires a client certificate, give --tls-cert and --tls-key (else: is it running and reachable? see --hosts): %w", at, err)
	case cfg.TLS == nil && (strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")):
		return fmt.Errorf("connect to Cassandra at %s: the connection was closed at once; does the cluster require TLS (--tls-ca)? %w", at, err)
	}
	return fmt.Errorf("connect to Cassandra at %s: %w (is it running and reachable? see --hosts)", at, err)
}

func ensureKeyspace(ctx context.Context, s *gocql.Session, cfg Config) (made bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var name string
	err = s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, cfg.Dataset).
		WithContext(ctx).Scan(&name)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, gocql.ErrNotFound):
		return false, fmt.Errorf("look up dataset %q: %w", cfg.Dataset, err)
	case !cfg.Create:
		return false, fmt.Errorf("dataset %q: %w (ingest creates it)", cfg.Dataset, store.ErrNotFound)
	}
	// Dataset names are validated identifiers, so formatting them into CQL is safe.
	q := fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`,
		cfg.Dataset, cfg.ReplicationFactor)
	ctx, cancel = context.WithTimeout(context.Background(), 2*cfg.Timeout)
	defer cancel()
	if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
		return false, fmt.Errorf("create dataset %q: %w", cfg.Dataset, err)
	}
	return true, nil
}
