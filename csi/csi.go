// Package csi is cassfs's CSI node plugin (`cassfs csi`): it makes datasets volumes of
// Kubernetes pods, mounted by a privileged plugin and served by an unprivileged daemon.
//
// # Staging and publishing
//
// A volume is a dataset and its mount options (mount.VolumeFromAttributes reads them
// from the volume's attributes). NodeStageVolume opens /dev/fuse, mounts that
// connection read-only at the staging path (type fuse.cassfs, source cassfs:<dataset>,
// MS_RDONLY|MS_NOSUID|MS_NODEV, options fd, rootmode, user_id and group_id of the serving
// daemon, allow_other, default_permissions, max_read), and hands the descriptor to the
// serving daemon (package handover, Config.DaemonSocket), whose user is the owner of that
// socket. It then closes its own copy, so that the daemon holds the only one: a daemon
// that dies ends the connection, and readers get errors instead of hanging. A hand-over
// that fails is undone (unmounted) and fails the call with the daemon's reason.
// NodePublishVolume bind-mounts the staging path at each pod's target path, read-only:
// one FUSE connection, one daemon, one cache per volume and node, however many pods.
//
// # Idempotency
//
// Every call may be repeated: staging what is staged and served, or publishing what is
// published there, succeeds at once; unpublishing or unstaging what is not mounted
// succeeds. A staging path whose daemon died (ENOTCONN) is unmounted and staged anew.
// NodeUnpublishVolume removes the target directory (the plugin makes it);
// NodeUnstageVolume removes the staging directory only if the plugin made it. Calls on
// the same volume (stage, unstage) or the same target (publish, unpublish) at once are
// refused with Aborted, for the caller to retry.
//
// # Services
//
// Identity, Node (STAGE_UNSTAGE_VOLUME), and a Controller that answers
// ControllerGetCapabilities with RPC_UNKNOWN only (csi-test v5.4.0's node suite wants a
// non-empty list) and Unimplemented to everything else: volumes are datasets that exist,
// named by PersistentVolumes; nothing is provisioned or attached.
//
// Secrets (the volume's database credentials) are passed on to the daemon and never
// logged: calls are logged by method, volume id and outcome only.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Name is the plugin's name (a CSIDriver's metadata.name).
const Name = "cassfs.csi.cassfs.io"

// Config configures the plugin.
type Config struct {
	// Endpoint is the Unix socket the plugin serves CSI on ("unix://" optional).
	Endpoint string
	NodeID   string // this node's name, as NodeGetInfo reports it
	// DaemonSocket is where the serving daemon listens for hand-overs (handover.Listen).
	DaemonSocket string
	// HandoverTimeout bounds one hand-over (handover.DefaultTimeout if zero).
	HandoverTimeout time.Duration
	Log             *slog.Logger // nil: discarded
}

// Run serves the plugin at cfg.Endpoint until ctx is done, then stops gracefully
// (calls in progress get 10 s to finish).
func Run(ctx context.Context, cfg Config) error {
	d, err := newDriver(cfg)
	if err != nil {
		return err
	}
	path := strings.TrimPrefix(cfg.Endpoint, "unix://")
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(path) // left by a plugin that is gone: a new one is this one's place
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(d.logCalls))
	csi.RegisterIdentityServer(s, d)
	csi.RegisterNodeServer(s, d)
	csi.RegisterControllerServer(s, controller{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	go d.recoverLoop(ctx)
	d.log.Info("serving CSI", "endpoint", path, "node", cfg.NodeID, "daemon", cfg.DaemonSocket)
	select {
	case err := <-served:
		return fmt.Errorf("csi: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		s.Stop()
	}
	return nil
}

// driver serves the Identity and Node services.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	busy map[string]bool // guarded by mu: volume ids and target paths with a call in progress
	made map[string]bool // guarded by mu: staging directories this plugin made
	// staged: the volumes this plugin staged, by id, to serve them again after the
	// daemon died (recover.go); guarded by mu.
	staged map[string]*staged
}

func newDriver(cfg Config) (*driver, error) {
	switch {
	case cfg.Endpoint == "":
		return nil, errors.New("csi: no endpoint")
	case cfg.NodeID == "":
		return nil, errors.New("csi: no node id")
	case cfg.DaemonSocket == "":
		return nil, errors.New("csi: no serving daemon's socket")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &driver{cfg: cfg, log: log, busy: map[string]bool{}, made: map[string]bool{}, staged: map[string]*staged{}}, nil
}

// logCalls logs each call's method, volume and outcome; never the request (secrets).
func (d *driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	attrs := []any{"method", info.FullMethod}
	if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
		attrs = append(attrs, "volume", v.GetVolumeId())
	}
	if err != nil {
		d.log.Warn("CSI call failed", append(attrs, "err", err)...)
	} else {
		d.log.Debug("CSI call", attrs...)
	}
	return resp, err
}

// hold marks key busy, or returns Aborted if a call holds it; release with the func.
func (d *driver) hold(key string) (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[key] {
		return nil, status.Errorf(codes.Aborted, "a call on %s is in progress", key)
	}
	d.busy[key] = true
	return func() { d.mu.Lock(); delete(d.busy, key); d.mu.Unlock() }, nil
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	return &csi.GetPluginInfoResponse{Name: Name, VendorVersion: version}, nil
}

// GetPluginCapabilities lists none: no controller service (nothing to provision), and
// volumes are reachable from every node.
func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.cfg.NodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

// controller is the Controller service of a plugin that provisions and attaches nothing.
type controller struct {
	csi.UnimplementedControllerServer
}

// ControllerGetCapabilities answers RPC_UNKNOWN alone: csi-test v5.4.0's node suite
// calls it whatever the plugin's capabilities say, and fails on an empty list.
func (controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_UNKNOWN}},
	}}}, nil
}
