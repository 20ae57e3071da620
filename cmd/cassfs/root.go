package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/spf13/cobra"
)

// usageError marks bad flags or arguments (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "cassfs",
		Short: "Image datasets in Cassandra/ScyllaDB, served to deep-learning readers as files",
		Long: `cassfs keeps image datasets (blobs plus metadata) in Apache Cassandra or ScyllaDB
and serves them to unmodified deep-learning readers: the commands are listed below.

The database is reached at --hosts (default $CASSFS_HOSTS, else 127.0.0.1:9042), over TLS
with --tls-ca (and --tls-cert/--tls-key for client certificates), logging in with
--username and the password from $CASSFS_PASSWORD or --password-file.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("cassfs {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	var config string
	root.PersistentFlags().StringVar(&config, "config", "", "YAML file of flag values (flag names as keys, e.g. dataset: tiles); flags on the command line win")
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error { return applyConfig(c, config) }
	root.AddCommand(newIngestCmd(), newGenCmd(), newSplitCmd(), newDatasetCmd(), newMountCmd(), newStatsCmd(), newBenchCmd(), newCacheCmd(), newLookaheadCmd(), newCSICmd(), newServeCmd(), newVersionCmd())
	return root
}

// dbFlags are the flags of every command that talks to the database.
type dbFlags struct {
	hosts       string
	dataset     string
	localDC     string
	timeout     time.Duration
	maxInFlight int
	addressMap  []string
	conns       int
	tls         bool
	tlsCA       string
	tlsCert     string
	tlsKey      string
	tlsName     string
	username    string
	passFile    string
}

// register adds the flags to c; a maxInFlight set before is the command's default.
func (f *dbFlags) register(c *cobra.Command) {
	def := os.Getenv("CASSFS_HOSTS")
	if def == "" {
		def = "127.0.0.1:9042"
	}
	fl := c.Flags()
	fl.StringVar(&f.hosts, "hosts", def, "comma-separated Cassandra/ScyllaDB contact points, host or host:port (env CASSFS_HOSTS)")
	fl.StringVarP(&f.dataset, "dataset", "d", "", "dataset name (a keyspace: lowercase letters, digits, '_'); required")
	fl.StringVar(&f.localDC, "local-dc", "", "keep requests in this data centre (default: any)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "deadline of every database request, retries included")
	inFlight := 256
	if f.maxInFlight > 0 {
		inFlight = f.maxInFlight // the command's own default
	}
	fl.IntVar(&f.maxInFlight, "max-in-flight", inFlight, "most database requests in flight at once")
	fl.IntVar(&f.conns, "conns-per-host", 2, "connections to each node (requests are multiplexed over them)")
	fl.StringArrayVar(&f.addressMap, "address-map", nil, "reach a node that advertises FROM at TO instead, as FROM=TO with host:port each (NAT, tunnels, proxies); repeatable")
	fl.BoolVar(&f.tls, "tls", false, "connect over TLS, verifying the nodes' certificates against the system's CAs (implied by the other --tls flags)")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CA certificates that sign the nodes' certificates (TLS)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate, for clusters that require one (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fl.StringVar(&f.tlsName, "tls-server-name", "", "name the nodes' certificates carry, if not the address connected to")
	fl.StringVar(&f.username, "username", os.Getenv("CASSFS_USERNAME"), "log in as this user (env CASSFS_USERNAME); the password comes from $CASSFS_PASSWORD or --password-file, never the command line")
	fl.StringVar(&f.passFile, "password-file", "", "file holding the password of --username (mode 0600 or stricter)")
}

// password reads the login password: from --password-file, else $CASSFS_PASSWORD.
func (f *dbFlags) password() (string, error) {
	if f.passFile == "" {
		return os.Getenv("CASSFS_PASSWORD"), nil
	}
	fi, err := os.Stat(f.passFile)
	if err != nil {
		return "", usageError{fmt.Errorf("--password-file: %w", err)}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", usageError{fmt.Errorf("--password-file %s can be read by others (mode %04o): chmod 600 it", f.passFile, fi.Mode().Perm())}
	}
	b, err := os.ReadFile(f.passFile)
	if err != nil {
		return "", usageError{fmt.Errorf("--password-file: %w", err)}
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (f *dbFlags) config() (cassandra.Config, error) {
	if f.dataset == "" {
		return cassandra.Config{}, usageError{errors.New("--dataset is required")}
	}
	if err := cassandra.ValidDatasetName(f.dataset); err != nil {
		return cassandra.Config{}, usageError{err}
	}
	return f.clusterConfig()
}

// clusterConfig is config without a dataset (commands about every dataset of a cluster).
func (f *dbFlags) clusterConfig() (cassandra.Config, error) {
	if f.timeout <= 0 {
		return cassandra.Config{}, usageError{fmt.Errorf("--timeout must be positive, got %v", f.timeout)}
	}
	if f.conns <= 0 {
		return cassandra.Config{}, usageError{fmt.Errorf("--conns-per-host must be positive, got %d", f.conns)}
	}
	if f.maxInFlight <= 0 {
		return cassandra.Config{}, usageError{fmt.Errorf("--max-in-flight must be positive, got %d", f.maxInFlight)}
	}
	hosts := cassandra.ParseHosts(f.hosts)
	if len(hosts) == 0 {
		return cassandra.Config{}, usageError{errors.New("--hosts is empty")}
	}
	amap, err := cassandra.ParseAddressMap(f.addressMap)
	if err != nil {
		return cassandra.Config{}, usageError{fmt.Errorf("--address-map %w", err)}
	}
	var tlsCfg *cassandra.TLSConfig
	if f.tls || f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsName != "" {
		if (f.tlsCert == "") != (f.tlsKey == "") {
			return cassandra.Config{}, usageError{errors.New("--tls-cert and --tls-key go together")}
		}
		tlsCfg = &cassandra.TLSConfig{CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey, ServerName: f.tlsName}
	}
	password, err := f.password()
	if err != nil {
		return cassandra.Config{}, err
	}
	if f.username == "" && password != "" && f.passFile != "" {
		return cassandra.Config{}, usageError{errors.New("--password-file needs --username")}
	}
	return cassandra.Config{
		TLS:         tlsCfg,
		Username:    f.username,
		Password:    password,
		AddressMap:  amap,
		NumConns:    f.conns,
		Hosts:       hosts,
		Dataset:     f.dataset,
		LocalDC:     f.localDC,
		Timeout:     f.timeout,
		MaxInFlight: f.maxInFlight,
	}, nil
}

// datasets checks --dataset as cassfs mount takes it: one dataset, or several,
// comma-separated.
func (f *dbFlags) datasets() ([]string, error) {
	names := strings.Split(f.dataset, ",")
	for _, n := range names {
		g := *f
		g.dataset = n
		if _, err := g.config(); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// openStores opens the datasets of --dataset (datasets): one with a session of its own,
// several through one session (cassandra.Cluster). closeAll closes them.
func (f *dbFlags) openStores(ctx context.Context, log *slog.Logger) (stores []store.Store, closeAll func(), err error) {
	names, err := f.datasets()
	if err != nil || len(names) == 1 {
		st, err := f.openStore(ctx, storeOpts{log: log})
		return []store.Store{st}, func() { st.Close() }, err
	}
	cfg, err := f.clusterConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.Logger = log
	opened, cl, err := cassandra.OpenEach(ctx, cfg, names)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w; check --dataset, or ingest it first", err)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, st := range opened {
		stores = append(stores, st)
	}
	return stores, func() { cassandra.CloseEach(opened, cl) }, nil
}

// storeOpts are what a command needs of its store beyond the database flags.
type storeOpts struct {
	create      bool         // make a missing dataset (ingest)
	attach      bool         // with create: the catalogue of an attached dataset (dataset attach)
	replication int          // replication factor of a created dataset
	log         *slog.Logger // where the driver's own messages go (nil: slog's default logger)
}

// openStore opens the dataset named by the database flags (or the configuration file that
// set them): the one place a command gets its store. A dataset that does not exist is an
// error saying what to do, unless o.create.
func (f *dbFlags) openStore(ctx context.Context, o storeOpts) (store.Store, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	cfg.Create, cfg.Attach, cfg.ReplicationFactor, cfg.Logger = o.create, o.attach, o.replication, o.log
	st, err := cassandra.Open(ctx, cfg)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w; check --dataset, or ingest it first", err)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}
