package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"
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

// CassandraConfig configures a connection to one dataset.
type CassandraConfig struct {
	// Hosts are contact points, "host" or "host:port"; the rest of the cluster is discovered.
	Hosts []string
	// Port is used for hosts without a port (default 9042).
	Port int
	// Dataset is the keyspace.
	Dataset string
	// Create makes a missing dataset (keyspace and tables) instead of failing with ErrNotFound.
	Create bool
	// ReplicationFactor of a created keyspace (SimpleStrategy, default 1).
	ReplicationFactor int
	// LocalDC, if set, keeps requests in that data centre (DCAwareRoundRobinPolicy).
	LocalDC string
	// Timeout bounds every request, retries included (default 10s).
	Timeout time.Duration
	// ConnectTimeout bounds connection set-up (default 5s).
	ConnectTimeout time.Duration
	// MaxInFlight bounds the requests this store has in flight at once (default 256); more
	// waits. Unbounded concurrency ends in gocql's "no streams available".
	MaxInFlight int
	// NumConns is the number of connections per host (default 2).
	NumConns int
	// ScanRanges is the number of token sub-ranges a Scan splits the ring into (default 256),
	// and ScanParallel how many it reads at once (default 8).
	ScanRanges, ScanParallel int
	// AddressMap rewrites the addresses nodes advertise ("host:port" → "host:port"), for
	// clusters reached through NAT, a tunnel or a proxy.
	AddressMap map[string]string
	// SpeculativeAfter, if positive, sends a blob read that has not been answered after this
	// long once more (to a replica picked anew), and takes whichever answer comes first: a
	// slow or frozen replica then costs that delay instead of the whole Timeout. Only on
	// clusters of more than one node (default 0: off).
	SpeculativeAfter time.Duration
	// TLS, if set, encrypts every connection and verifies the nodes' certificates.
	TLS *TLSConfig
	// Username and Password log in (PasswordAuthenticator); empty Username: no login.
	Username, Password string
	// WriteCoalesceWait is gocql's write coalescing delay (default 0: send at once, which is
	// what a latency-bound reader wants).
	WriteCoalesceWait time.Duration
}

func (c *CassandraConfig) defaults() {
	if c.Port == 0 {
		c.Port = 9042
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.NumConns == 0 {
		c.NumConns = 2
	}
	if c.ScanRanges == 0 {
		c.ScanRanges = 256
	}
	if c.ScanParallel == 0 {
		c.ScanParallel = 8
	}
}

// Cassandra is a Store on Apache Cassandra or ScyllaDB through gocql (v1 API, so the
// shard-aware github.com/scylladb/gocql can replace it with a go.mod replace directive).
type Cassandra struct {
	cfg     CassandraConfig
	session *gocql.Session
	sem     chan struct{} // bounds requests in flight

	mu      sync.Mutex
	columns []string // guarded by mu; user columns of samples, sorted
	// splitTables is set once the split tables are known to exist; guarded by mu.
	splitTables bool
	nodes       int          // nodes in the cluster when the store was opened
	hedges      atomic.Int64 // blob reads sent a second time
}

var _ Store = (*Cassandra)(nil)

// OpenCassandra connects to the dataset cfg.Dataset. A missing dataset wraps ErrNotFound
// unless cfg.Create is set, in which case the keyspace and tables are created.
func OpenCassandra(ctx context.Context, cfg CassandraConfig) (*Cassandra, error) {
	cfg.defaults()
	if err := ValidDatasetName(cfg.Dataset); err != nil {
		return nil, err
	}
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("no Cassandra hosts given")
	}
	// gocql fills its token-aware replica map only for the session's keyspace, so the
	// keyspace must exist before the session that serves reads is created.
	boot, err := newSession(cfg, "")
	if err != nil {
		return nil, err
	}
	err = ensureKeyspace(ctx, boot, cfg)
	boot.Close()
	if err != nil {
		return nil, err
	}
	s, err := newSession(cfg, cfg.Dataset)
	if err != nil {
		return nil, err
	}
	c := &Cassandra{cfg: cfg, session: s, sem: make(chan struct{}, cfg.MaxInFlight)}
	if cfg.Create {
		if err := c.createTables(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if _, err := c.Columns(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if c.nodes, err = c.countNodes(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return c, nil
}

// countNodes counts the cluster's nodes: the coordinator and its peers.
func (c *Cassandra) countNodes(ctx context.Context) (int, error) {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	iter := c.session.Query(`SELECT peer FROM system.peers`).WithContext(rctx).Idempotent(true).Iter()
	n := 1
	var peer net.IP
	for iter.Scan(&peer) {
		n++
	}
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	return n, nil
}

func newSession(cfg CassandraConfig, keyspace string) (*gocql.Session, error) {
	cl := gocql.NewCluster(cfg.Hosts...)
	cl.Port = cfg.Port
	cl.Keyspace = keyspace
	// v1.7.0's protocol v5 support is beta and lacks v5 framing.
	cl.ProtoVersion = 4
	cl.Consistency = gocql.LocalOne
	cl.Timeout = cfg.Timeout
	cl.ConnectTimeout = cfg.ConnectTimeout
	cl.NumConns = cfg.NumConns
	cl.WriteCoalesceWaitTime = cfg.WriteCoalesceWait
	cl.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 2}
	// A node that comes back is used again within seconds, not gocql's default minute: a
	// mount outlives outages, and with every node down nothing else would notice the return.
	cl.ReconnectInterval = 2 * time.Second
	var fallback gocql.HostSelectionPolicy = gocql.RoundRobinHostPolicy()
	if cfg.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(cfg.LocalDC)
	}
	cl.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas())
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
			return nil, err
		}
		// EnableHostVerification: gocql otherwise skips verifying the chain as well.
		cl.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: true}
	}
	if cfg.Username != "" {
		cl.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	s, err := cl.CreateSession()
	if err != nil {
		return nil, connectError(cfg, err)
	}
	return s, nil
}

// connectError says why a session could not be made, and what to check. The password
// never appears in it.
//
// gocql 1.7 flattens the causes of a failed session into text ("unable to connect to
// initial hosts: %v", control.go; "unable to create session: %v", session.go), so after
// errors.As, the cause is recognised by the messages of crypto/tls, crypto/x509 and
// Cassandra's authenticator.
func connectError(cfg CassandraConfig, err error) error {
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
	case cfg.TLS == nil && (strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")):
		return fmt.Errorf("connect to Cassandra at %s: the connection was closed at once; does the cluster require TLS (--tls-ca)? %w", at, err)
	}
	return fmt.Errorf("connect to Cassandra at %s: %w (is it running and reachable? see --hosts)", at, err)
}

func ensureKeyspace(ctx context.Context, s *gocql.Session, cfg CassandraConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var name string
	err := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, cfg.Dataset).
		WithContext(ctx).Scan(&name)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, gocql.ErrNotFound):
		return fmt.Errorf("look up dataset %q: %w", cfg.Dataset, err)
	case !cfg.Create:
		return fmt.Errorf("dataset %q: %w (ingest creates it)", cfg.Dataset, ErrNotFound)
	}
	// Dataset names are validated identifiers, so formatting them into CQL is safe.
	q := fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`,
		cfg.Dataset, cfg.ReplicationFactor)
	ctx, cancel = context.WithTimeout(context.Background(), 2*cfg.Timeout)
	defer cancel()
	if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("create dataset %q: %w", cfg.Dataset, err)
	}
	return nil
}

func (c *Cassandra) createTables(ctx context.Context) error {
	for _, q := range append([]string{
		// Blobs do not compress; the label sits beside the data so one read returns both.
		`CREATE TABLE IF NOT EXISTS blobs (id uuid PRIMARY KEY, label int, data blob) WITH compression = {'enabled': 'false'}`,
		`CREATE TABLE IF NOT EXISTS samples (id uuid PRIMARY KEY, label int, name text, size bigint, checksum blob)`,
		`CREATE TABLE IF NOT EXISTS labels (label int PRIMARY KEY, name text)`,
	}, splitTables...) {
		if err := c.ddl(ctx, q); err != nil {
			return fmt.Errorf("create tables of dataset %q: %w", c.cfg.Dataset, err)
		}
	}
	return nil
}

func (c *Cassandra) ddl(ctx context.Context, q string) error {
	// Schema changes wait for schema agreement across nodes; allow more than a read.
	ctx, cancel := context.WithTimeout(ctx, 3*c.cfg.Timeout)
	defer cancel()
	return c.session.Query(q).WithContext(ctx).Exec()
}

// Dataset implements Store.
func (c *Cassandra) Dataset() string { return c.cfg.Dataset }

// acquire takes a slot of the in-flight bound and returns a context with the per-request
// deadline; release must be called when the request is done.
func (c *Cassandra) acquire(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	return rctx, func() { cancel(); <-c.sem }, nil
}

// AddColumns implements Store.
func (c *Cassandra) AddColumns(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := ValidColumnName(n); err != nil {
			return err
		}
	}
	have, err := c.Columns(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if slices.Contains(have, n) {
			continue
		}
		// n is a validated identifier.
		if err := c.ddl(ctx, fmt.Sprintf(`ALTER TABLE samples ADD %s text`, n)); err != nil {
			// Another ingest may have added it meanwhile; only the schema can tell.
			now, cerr := c.Columns(ctx)
			if cerr != nil || !slices.Contains(now, n) {
				return fmt.Errorf("add metadata column %q to dataset %q: %w", n, c.cfg.Dataset, err)
			}
		}
	}
	_, err = c.Columns(ctx)
	return err
}

// Columns implements Store.
func (c *Cassandra) Columns(ctx context.Context) ([]string, error) {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	iter := c.session.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'samples'`,
		c.cfg.Dataset).WithContext(rctx).Iter()
	var cols []string
	var name string
	for iter.Scan(&name) {
		if !slices.Contains(BuiltinColumns, name) {
			cols = append(cols, name)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read columns of dataset %q: %w", c.cfg.Dataset, err)
	}
	slices.Sort(cols)
	c.mu.Lock()
	c.columns = cols
	c.mu.Unlock()
	return slices.Clone(cols), nil
}

// SetLabels implements Store.
func (c *Cassandra) SetLabels(ctx context.Context, names []string) error {
	for i, n := range names {
		if err := c.exec(ctx, gocql.LocalQuorum, `INSERT INTO labels (label, name) VALUES (?, ?)`, i, n); err != nil {
			return fmt.Errorf("store label %d (%q) of dataset %q: %w", i, n, c.cfg.Dataset, err)
		}
	}
	return nil
}

// Labels implements Store.
func (c *Cassandra) Labels(ctx context.Context) ([]string, error) {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	iter := c.session.Query(`SELECT label, name FROM labels`).WithContext(rctx).Idempotent(true).Iter()
	byLabel := map[int]string{}
	var label int
	var name string
	for iter.Scan(&label, &name) {
		byLabel[label] = name
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read labels of dataset %q: %w", c.cfg.Dataset, err)
	}
	out := make([]string, len(byLabel))
	for l, n := range byLabel {
		if l < 0 || l >= len(out) {
			return nil, fmt.Errorf("dataset %q: labels are not numbered 0..%d (found %d)", c.cfg.Dataset, len(out)-1, l)
		}
		out[l] = n
	}
	return out, nil
}

func (c *Cassandra) exec(ctx context.Context, cons gocql.Consistency, q string, args ...any) error {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Every write here is idempotent: the same id always gets the same content.
	return c.session.Query(q, args...).WithContext(rctx).Consistency(cons).Idempotent(true).Exec()
}

// Put implements Store.
func (c *Cassandra) Put(ctx context.Context, s Sample, data []byte) error {
	if err := checkPut(s, data); err != nil {
		return err
	}
	c.mu.Lock()
	known := c.columns
	c.mu.Unlock()
	cols := []string{"id", "label", "name", "size", "checksum"}
	args := []any{gocql.UUID(s.ID), s.Label, s.Name, s.Size, s.Checksum[:]}
	keys := make([]string, 0, len(s.Meta))
	for k, v := range s.Meta {
		if v == "" {
			continue
		}
		if !slices.Contains(known, k) {
			return fmt.Errorf("put sample %s (%s): unknown metadata column %q", s.ID, s.Name, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys) // stable statement text, so gocql's prepared-statement cache hits
	for _, k := range keys {
		cols = append(cols, k)
		args = append(args, s.Meta[k])
	}
	// The blob first, then the metadata row: the row is the commit marker (see package doc).
	if err := c.exec(ctx, gocql.LocalQuorum, `INSERT INTO blobs (id, label, data) VALUES (?, ?, ?)`,
		gocql.UUID(s.ID), s.Label, data); err != nil {
		return fmt.Errorf("put blob of sample %s (%s): %w", s.ID, s.Name, err)
	}
	q := `INSERT INTO samples (` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`
	if err := c.exec(ctx, gocql.LocalQuorum, q, args...); err != nil {
		return fmt.Errorf("put metadata of sample %s (%s): %w", s.ID, s.Name, err)
	}
	return nil
}

// Get implements Store. With SpeculativeAfter on a cluster of several nodes, a read not
// answered within that delay is sent again (token-aware routing with shuffled replicas
// sends it to a replica picked anew) and the first answer wins; buf is then not used,
// since the slower attempt may still be writing into its buffer after Get returns.
//
// The hedge is made here, not with gocql's speculative execution: in gocql 1.7 a
// speculative attempt that finds no further host answers ErrNoConnections at once, and
// that answer wins the race (query_executor.go, executeQuery and do).
func (c *Cassandra) Get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error) {
	if c.cfg.SpeculativeAfter <= 0 || c.nodes < 2 {
		return c.get(ctx, id, buf)
	}
	type result struct {
		b   Blob
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the losing attempt stops
	results := make(chan result, 2)
	attempt := func() {
		b, err := c.get(ctx, id, nil)
		results <- result{b, err}
	}
	go attempt()
	hedge := time.NewTimer(c.cfg.SpeculativeAfter)
	defer hedge.Stop()
	running := 1
	for {
		select {
		case <-hedge.C:
			c.hedges.Add(1)
			running++
			go attempt()
		case r := <-results:
			running--
			// A missing sample is an answer; a failure waits for the other attempt.
			if r.err == nil || errors.Is(r.err, ErrNotFound) || running == 0 {
				return r.b, r.err
			}
		}
	}
}

// Hedges is how many blob reads were sent a second time (SpeculativeAfter).
func (c *Cassandra) Hedges() int64 { return c.hedges.Load() }

func (c *Cassandra) get(ctx context.Context, id uuid.UUID, buf []byte) (Blob, error) {
	rctx, release, err := c.acquire(ctx)
	if err != nil {
		return Blob{}, fmt.Errorf("get sample %s: %w", id, err)
	}
	defer release()
	b := Blob{Data: buf[:0]}
	// Scanning into a non-nil []byte reuses its storage (gocql appends to v[:0]).
	err = c.session.Query(`SELECT label, data FROM blobs WHERE id = ?`, gocql.UUID(id)).
		WithContext(rctx).Idempotent(true).Scan(&b.Label, &b.Data)
	if errors.Is(err, gocql.ErrNotFound) {
		return Blob{}, fmt.Errorf("get sample %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Blob{}, fmt.Errorf("get sample %s: %w", id, err)
	}
	return b, nil
}

// Scan implements Store: a parallel scan of the metadata table over token sub-ranges, never
// touching blobs.
func (c *Cassandra) Scan(ctx context.Context, fn func(Sample) error) error {
	cols, err := c.Columns(ctx)
	if err != nil {
		return err
	}
	q := `SELECT id, label, name, size, checksum`
	for _, col := range cols {
		q += ", " + col
	}
	q += ` FROM samples WHERE token(id) > ? AND token(id) <= ?`

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ranges := tokenRanges(c.cfg.ScanRanges)
	work := make(chan [2]int64)
	var (
		fnMu     sync.Mutex // serializes fn
		failed   bool       // guarded by fnMu; no fn call after a failure
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	call := func(s Sample) error {
		fnMu.Lock()
		defer fnMu.Unlock()
		if failed {
			return context.Canceled
		}
		if err := fn(s); err != nil {
			failed = true
			fail(err)
			return err
		}
		return nil
	}
	for w := 0; w < c.cfg.ScanParallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if err := c.scanRange(ctx, q, cols, r, call); err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for _, r := range ranges {
		select {
		case work <- r:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func (c *Cassandra) scanRange(ctx context.Context, q string, cols []string, r [2]int64, fn func(Sample) error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	// One sub-range is a few thousand narrow rows even for millions of samples; its pages
	// share one deadline.
	rctx, cancel := context.WithTimeout(ctx, 3*c.cfg.Timeout)
	defer cancel()
	iter := c.session.Query(q, r[0], r[1]).WithContext(rctx).Idempotent(true).PageSize(2000).Iter()
	var (
		id       gocql.UUID
		label    int
		name     string
		size     int64
		checksum []byte
	)
	meta := make([]*string, len(cols))
	dest := []any{&id, &label, &name, &size, &checksum}
	for i := range cols {
		meta[i] = new(string)
		dest = append(dest, meta[i])
	}
	for iter.Scan(dest...) {
		s := Sample{ID: uuid.UUID(id), Label: label, Name: name, Size: size}
		if len(checksum) != len(s.Checksum) {
			iter.Close()
			return fmt.Errorf("scan dataset %q: sample %s (%s) has a %d-byte checksum, want %d", c.cfg.Dataset, s.ID, name, len(checksum), len(s.Checksum))
		}
		copy(s.Checksum[:], checksum)
		for i, col := range cols {
			if *meta[i] != "" {
				if s.Meta == nil {
					s.Meta = make(map[string]string, len(cols))
				}
				s.Meta[col] = *meta[i]
			}
			*meta[i] = ""
		}
		if err := fn(s); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("scan dataset %q, tokens (%d, %d]: %w", c.cfg.Dataset, r[0], r[1], err)
	}
	return nil
}

// tokenRanges splits Murmur3's ring (-2^63, 2^63-1] into n contiguous (start, end] ranges.
// Murmur3Partitioner never yields the minimum token -2^63, so the first open bound loses
// nothing.
func tokenRanges(n int) [][2]int64 {
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	span := new(big.Int).Sub(hi, lo)
	out := make([][2]int64, 0, n)
	prev := int64(math.MinInt64)
	for i := 1; i <= n; i++ {
		end := new(big.Int).Mul(span, big.NewInt(int64(i)))
		end.Quo(end, big.NewInt(int64(n)))
		end.Add(end, lo)
		e := end.Int64()
		if i == n {
			e = math.MaxInt64
		}
		out = append(out, [2]int64{prev, e})
		prev = e
	}
	return out
}

// Close implements Store.
func (c *Cassandra) Close() error {
	c.session.Close()
	return nil
}

// isUnavailable reports errors that mean no node could serve a request.
func isUnavailable(err error) bool {
	var ue *gocql.RequestErrUnavailable
	return errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.As(err, &ue)
}

// isTimeout reports the driver's own timeouts and the server's.
func isTimeout(err error) bool {
	var rt *gocql.RequestErrReadTimeout
	return errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.As(err, &rt)
}

// SetLogger sends the driver's own messages (reconnections, hosts going up and down) to
// log, at level Warn, instead of the standard logger.
func SetLogger(log *slog.Logger) { gocql.Logger = driverLogger{log} }

type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "from", "gocql")
}
func (l driverLogger) Printf(format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "gocql")
}
func (l driverLogger) Println(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...)), "from", "gocql")
}
