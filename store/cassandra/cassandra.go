// Package cassandra is the store.Store backend on Apache Cassandra or ScyllaDB, through
// gocql (its v1 API, so the shard-aware github.com/scylladb/gocql can replace it with a
// go.mod replace directive). It owns everything CQL: the schema, Cassandra's name rules
// (ValidDatasetName) and the classification of the driver's errors into store's kinds. It
// is the only package of cassfs that imports gocql.
//
// # Data model
//
// A dataset is a keyspace. It holds these tables:
//
//   - blobs(id uuid PRIMARY KEY, label int, data blob): the encoded image with its label beside
//     it, so one point read returns both. Not compressed: JPEG/PNG do not compress. A
//     sample's target (a mask) is a blob too, under store.TargetID of the sample's id.
//   - samples(id uuid PRIMARY KEY, label int, name text, size bigint, checksum blob, crc32c
//     int, <user columns>): everything a listing needs without touching blobs. name is the
//     original path relative to the dataset root ("<class>/<file>"); checksum is the SHA-256
//     of the blob, crc32c its CRC32C (as a signed int; null for samples written before the
//     column existed, which a later write of the dataset adds). The
//     user's metadata columns (patient_id, slide, ...) are text columns added on demand.
//     target_ext, target_size, target_checksum and target_crc32c describe the sample's
//     target (null without one; added to older datasets when written to again).
//   - labels(label int PRIMARY KEY, name text): the class names.
//   - info(key text PRIMARY KEY, value text): facts about the dataset ("created"), the
//     catalogue's version and the description of its index snapshot (snapshot.go).
//   - index_chunks((id, chunk), crc32c, data): the index snapshot's bytes, 1 MiB a chunk.
//   - splits((bucket), name): one row per stored split (its size, chunk count, a SHA-256 of
//     its members and the generation holding them), all in one small partition so that a
//     set of splits is created or replaced by one atomic, isolated batch (and "create only
//     if absent" by one lightweight transaction). split_sets(id): the parameters and report
//     of the splits made together. split_chunks((generation, chunk)): a split's member ids,
//     packed 16 bytes each, SplitChunk ids per partition, so a split of millions of samples
//     makes no huge partition. Chunks are written before the rows that point to them;
//     replaced or deleted chunks are removed after.
//
// Put writes the blob (and the target's), then the samples row (the commit marker of store's
// contract); Scan reads the samples table page by page over token ranges, as many pages
// at once as the database serves faster, retrying what fails (rangescan.go), never
// touching blobs.
//
// Blob reads are not hedged here: store/hedge wraps Get, and Nodes tells whether that can
// help (store/hedge says why gocql's own speculative execution is not used). A mount's
// prefetcher reads blobs in blocks (GetBlock: one IN query per node owning some of the
// ids, sent to that node; block.go).
//
// # Deadlines and bounds
//
// Every request has the Config.Timeout deadline, retries included, and at most
// Config.MaxInFlight requests are in flight at once (more wait): unbounded concurrency ends
// in gocql's "no streams available". Of those, the prefetches of every mount reading
// through the session hold at most PrefetchShare together (PrefetchBound), so a demand
// read finds room whichever mount it is of.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/cassfs/cassfs/internal/inflight"
	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
)

// Config configures a connection to one dataset.
type Config struct {
	// Hosts are contact points, "host" or "host:port"; the rest of the cluster is discovered.
	Hosts []string
	// Port is used for hosts without a port (default 9042).
	Port int
	// Dataset is the keyspace.
	Dataset string
	// Create makes a missing dataset (keyspace and tables) instead of failing with store.ErrNotFound.
	Create bool
	// Attach, with Create, makes or opens the catalogue of a dataset made by attach (no
	// blobs table: its blobs are read from the tables it was attached to, see attached.go);
	// an existing dataset made otherwise is refused.
	Attach bool
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
	// ScanRanges is the number of token ranges a Scan starts from (default 64), and
	// ScanParallel the most pages it reads at once (default 64); how many it does read at
	// once adapts to the database (rangescan.go). At long round trips a scan costs a round
	// trip per page of its longest range in series: 64 ranges, and pages of 10,000 narrow
	// rows, make 200,000 samples one page each.
	ScanRanges, ScanParallel int
	// ScanStall is how long a Scan may read no row, retrying what fails, before it fails
	// (default 6×Timeout, at least 30s).
	ScanStall time.Duration
	// AddressMap rewrites the addresses nodes advertise ("host:port" → "host:port"), for
	// clusters reached through NAT, a tunnel or a proxy.
	AddressMap map[string]string
	// TLS, if set, encrypts every connection and verifies the nodes' certificates.
	TLS *TLSConfig
	// Username and Password log in (PasswordAuthenticator); empty Username: no login.
	Username, Password string
	// WriteCoalesceWait is gocql's write coalescing delay (default 0: send at once, which is
	// what a latency-bound reader wants).
	WriteCoalesceWait time.Duration
	// Logger receives the driver's own messages (reconnections, nodes going up and down),
	// at level Warn (default slog.Default()). It is this store's session's own (gocql's
	// ClusterConfig.Logger), not the driver's global: stores opened in one process with
	// different loggers log apart.
	Logger *slog.Logger
}

func (c *Config) defaults() {
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
		c.ScanRanges = 64
	}
	if c.ScanParallel == 0 {
		c.ScanParallel = 64
	}
	if c.ScanStall == 0 {
		c.ScanStall = max(6*c.Timeout, 30*time.Second)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Store is a store.Store on Apache Cassandra or ScyllaDB through gocql (v1 API, so the
// shard-aware github.com/scylladb/gocql can replace it with a go.mod replace directive).
type Store struct {
	cfg        Config
	session    *gocql.Session
	roundTrips *roundTrips   // the session's
	sem        chan struct{} // bounds requests in flight
	// prefetchs bounds the prefetches in flight of every mount of the session, below sem
	// (PrefetchShare); shared by the stores of one Cluster.
	prefetchs *inflight.Bound

	mu      sync.Mutex
	columns []string // guarded by mu; user columns of samples, sorted
	crc     bool     // guarded by mu; samples has the crc32c column (datasets made before it do not)
	targets bool     // guarded by mu; samples has the target_* columns
	// splitTables is set once the split tables are known to exist; guarded by mu.
	splitTables bool
	nodes       int    // nodes in the cluster when the store was opened
	getStmt     string // the blob read, with the keyspace in it
	blockStmt   string // the read of a block of blobs (block.go)
	policy      gocql.HostSelectionPolicy
	replicas    sync.WaitGroup // the background fetch of the replica map
	lastScan    ScanStats      // guarded by mu
	owns        bool           // the session is this store's own (Open), closed with it
	// attach is set by open (never changed after): what the dataset reads its blobs from if
	// attach made it.
	attach *attachState
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.BlockReader = (*Store)(nil)
)

// Cluster is one session with a cluster that the stores of several datasets share (a
// mount of several datasets): one set of connections, one bound on requests in flight
// (Config.MaxInFlight). Sessions name no keyspace (every statement names its dataset's),
// so any dataset of the cluster can be read through one.
type Cluster struct {
	cfg        Config
	session    *gocql.Session
	policy     gocql.HostSelectionPolicy
	roundTrips *roundTrips
	sem        chan struct{}
	prefetchs  *inflight.Bound
}

// PrefetchShare is the share of Config.MaxInFlight that the prefetches of every mount
// reading through one session may hold together (PrefetchBound); the rest is kept for
// demand reads, which then never wait behind prefetches. With cassfs mount's 1,280, 1,024.
func PrefetchShare(maxInFlight int) int { return max(maxInFlight-maxInFlight/5, 1) }

// Connect opens a session with the cluster cfg names; cfg.Dataset and cfg.Create are not
// used (see Cluster.Open).
func Connect(cfg Config) (*Cluster, error) {
	cfg.defaults()
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("no Cassandra hosts given")
	}
	s, policy, rt, err := newSession(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{cfg: cfg, session: s, policy: policy, roundTrips: rt, sem: make(chan struct{}, cfg.MaxInFlight), prefetchs: inflight.New(PrefetchShare(cfg.MaxInFlight))}, nil
}

// Open opens dataset through the cluster's session; a missing dataset wraps
// store.ErrNotFound. Closing the store leaves the session open.
func (cl *Cluster) Open(ctx context.Context, dataset string) (*Store, error) {
	cfg := cl.cfg
	cfg.Dataset, cfg.Create = dataset, false
	if err := ValidDatasetName(dataset); err != nil {
		return nil, err
	}
	return cl.open(ctx, cfg)
}

// OpenEach opens every dataset of names through one new session (Connect, Cluster.Open):
// all of them, or none and an error naming the dataset that failed.
func OpenEach(ctx context.Context, cfg Config, names []string) ([]*Store, *Cluster, error) {
	cl, err := Connect(cfg)
	if err != nil {
		return nil, nil, err
	}
	var stores []*Store
	for _, n := range names {
		st, err := cl.Open(ctx, n)
		if err != nil {
			CloseEach(stores, cl)
			return nil, nil, err
		}
		stores = append(stores, st)
	}
	return stores, cl, nil
}

// CloseEach closes stores, then the session they share.
func CloseEach(stores []*Store, cl *Cluster) {
	for _, st := range stores {
		st.Close()
	}
	cl.Close()
}

// Close ends the session. Close the stores opened through it first.
func (cl *Cluster) Close() error {
	cl.session.Close()
	return nil
}

// Open connects to the dataset cfg.Dataset with a session of its own. A missing dataset
// wraps store.ErrNotFound unless cfg.Create is set, in which case the keyspace and tables
// are created.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.defaults()
	if err := ValidDatasetName(cfg.Dataset); err != nil {
		return nil, err
	}
	cl, err := Connect(cfg)
	if err != nil {
		return nil, err
	}
	c, err := cl.open(ctx, cfg)
	if err != nil {
		cl.Close()
		return nil, err
	}
	c.owns = true
	return c, nil
}

// open opens cfg.Dataset through cl's session.
func (cl *Cluster) open(ctx context.Context, cfg Config) (*Store, error) {
	s, policy := cl.session, cl.policy
	c := &Store{cfg: cfg, session: s, roundTrips: cl.roundTrips, sem: cl.sem, prefetchs: cl.prefetchs, policy: policy}
	c.getStmt = c.cql(`SELECT label, data FROM DS.blobs WHERE id = ?`)
	c.blockStmt = c.cql(`SELECT id, label, data FROM DS.blobs WHERE id IN ?`)
	// The dataset, the schema and the cluster's size, at once: each is a round trip.
	var ksErr, colErr, nodeErr, attErr error
	var made bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); made, ksErr = ensureKeyspace(ctx, s, cfg) }()
	go func() { defer wg.Done(); c.nodes, nodeErr = c.countNodes(ctx) }()
	if !cfg.Create {
		wg.Add(1)
		go func() { defer wg.Done(); c.attach, attErr = c.readAttachState(ctx) }()
		_, colErr = c.Columns(ctx)
	}
	wg.Wait()
	if err := errors.Join(ksErr, colErr, nodeErr, attErr); err != nil {
		if ksErr != nil {
			return nil, ksErr // the dataset is missing: that explains the rest
		}
		return nil, err
	}
	if !cfg.Create {
		if err := c.checkAttachState(ctx, c.attach, true); err != nil {
			return nil, err
		}
	}
	if cfg.Create {
		c.attach = &attachState{}
		if !made {
			var err error
			if c.attach, err = c.readAttachState(ctx); err != nil {
				return nil, err
			}
		}
		if err := c.checkAttachState(ctx, c.attach, !made); err != nil {
			return nil, err
		}
		create := c.createTables
		if cfg.Attach {
			create = c.createAttachedTables
		}
		if err := create(ctx); err != nil {
			return nil, err
		}
		if made {
			if err := c.setCreated(ctx, time.Now()); err != nil {
				return nil, err
			}
		}
		if _, err := c.Columns(ctx); err != nil {
			return nil, err
		}
	}
	// Token-aware routing needs the keyspace's replication; gocql fetches the whole
	// keyspace's schema for it (about fifteen round trips in series). Reads go to the
	// token's primary owner until it is there, so it is fetched in the background.
	c.replicas.Add(1)
	go func() {
		defer c.replicas.Done()
		policy.KeyspaceChanged(gocql.KeyspaceUpdateEvent{Keyspace: cfg.Dataset, Change: "UPDATED"})
	}()
	return c, nil
}

// cql names the dataset's tables in stmt: statements are written with "DS.<table>", and
// every table is named with its keyspace (sessions have none; see newSession).
func (c *Store) cql(stmt string) string {
	return strings.ReplaceAll(stmt, " DS.", " "+c.cfg.Dataset+".")
}

// countNodes counts the cluster's nodes: the coordinator and its peers.
func (c *Store) countNodes(ctx context.Context) (int, error) {
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

// Nodes is how many nodes the cluster had when the store was opened. Hedging blob reads
// (store/hedge) only helps with more than one: on a single node the second attempt goes
// where the first is waiting.
func (c *Store) Nodes() int { return c.nodes }

// RoundTrip is the shortest time a query of the store's session took to be answered: about
// the link's round trip, measured on the small queries of opening, which queue behind
// nothing (blob reads, which can queue behind each other at a busy node, only ever lower
// it); 0 before any answer.
func (c *Store) RoundTrip() time.Duration { return time.Duration(c.roundTrips.least.Load()) }

// PrefetchBound is the bound on prefetches in flight that every store of this store's
// session shares (see PrefetchShare and package inflight).
func (c *Store) PrefetchBound() *inflight.Bound { return c.prefetchs }

// Close implements store.Store. The session is closed if the store has its own (Open), not
// if it shares a Cluster's.
func (c *Store) Close() error {
	if c.owns {
		c.session.Close()
	}
	// Ends at once if the session is closed (its queries fail); with a Cluster's session,
	// once the keyspace's schema is fetched (bounded by the request timeout).
	c.replicas.Wait()
	return nil
}
