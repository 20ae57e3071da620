package main

import (
	"errors"
	"github.com/cassfs/cassfs/mount"
	"log/slog"
	"os"

	"github.com/cassfs/cassfs/csi"
	"github.com/cassfs/cassfs/serve"
	"github.com/spf13/cobra"
)

func newCSICmd() *cobra.Command {
	var (
		cfg      csi.Config
		logLevel string
	)
	c := &cobra.Command{
		Use:   "csi",
		Short: "Run the CSI node plugin: mount datasets for pods, served by cassfs serve",
		Long: `csi serves CSI (plugin ` + csi.Name + `) until SIGTERM, privileged, on every node: it mounts
/dev/fuse at a volume's staging path, hands the connection to the serving daemon at
--serve-socket (whose user owns it) and bind-mounts it read-only into each pod. A volume's
attributes are mount's flags without the dashes (dataset required).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, c.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.Log = log.With(slog.String("component", "csi"))
			return csi.Run(c.Context(), cfg)
		},
	}
	fl := c.Flags()
	fl.StringVar(&cfg.Endpoint, "endpoint", "/csi/csi.sock", "Unix socket to serve CSI on (the kubelet's plugin registration points here)")
	fl.StringVar(&cfg.NodeID, "node-id", "", "this node's name (e.g. from the downward API's spec.nodeName)")
	fl.StringVar(&cfg.DaemonSocket, "serve-socket", "/run/cassfs/serve.sock", "Unix socket the serving daemon (cassfs serve --socket) takes connections on")
	fl.DurationVar(&cfg.HandoverTimeout, "handover-timeout", 0, "how long to wait for the serving daemon to take a volume (default 30s)")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	c.MarkFlagRequired("node-id")
	return c
}

func newServeCmd() *cobra.Command {
	var (
		db       dbFlags
		socket   string
		logLevel string
	)
	c := &cobra.Command{
		Use:   "serve --socket PATH",
		Short: "Serve the volumes the CSI node plugin hands over, unprivileged, one process per node",
		Long: `serve takes each volume's FUSE connection from cassfs csi over --socket (mode 0600: the
plugin mounts connections for its owner) and serves it, unprivileged, until unmounted; the
volumes of one cluster and login share a session (the "hosts" attribute, else --hosts),
and its --max-in-flight: the prefetches of every volume together hold at most four fifths
of it, so a reader's demand read never waits behind another volume's prefetches.
If serve dies, readers get errors at once, never a hang.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, c.ErrOrStderr())
			cfg, cerr := db.clusterConfig()
			if err = errors.Join(err, cerr); err != nil {
				return err
			}
			exe, _ := os.Executable()
			return serve.Run(c.Context(), serve.Config{Socket: socket, DB: cfg, LookaheadHelper: []string{exe, "lookahead-helper"}, Log: log.With(slog.String("component", "serve"))})
		},
	}
	// Room for the prefetches of the volumes on a long link and their demand reads, as a
	// mount has (cassfs mount).
	db.maxInFlight = mount.MaxInFlight
	db.register(c)
	c.Flags().Lookup("dataset").Usage = "not used: each volume names its dataset"
	c.Flags().StringVar(&socket, "socket", "/run/cassfs/serve.sock", "Unix socket to take volumes from cassfs csi on")
	c.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return c
}
