package main

import (
	"log/slog"

	"github.com/cassfs/cassfs/csi"
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
--daemon-socket (whose user owns it) and bind-mounts it read-only into each pod. A volume's
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
	fl.StringVar(&cfg.DaemonSocket, "daemon-socket", "/run/cassfs/serve.sock", "Unix socket the serving daemon takes connections on")
	fl.DurationVar(&cfg.HandoverTimeout, "handover-timeout", 0, "how long to wait for the serving daemon to take a volume (default 30s)")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	c.MarkFlagRequired("node-id")
	return c
}
