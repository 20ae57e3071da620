// Package serve is the daemon that serves a node's volumes (`cassfs serve`). The node
// plugin (package csi), privileged, mounts each volume's FUSE connection at its staging path
// and hands the open /dev/fuse descriptor over (package handover); this process, with no
// privilege, serves every one of them from one process: each volume a dataset's mount
// (package mount, Mount.ServeFD), the volumes of one cluster and login through one database
// session, one memory limit for all.
//
// A volume ends when its connection does: the plugin unmounts the staging path (unstage),
// and the daemon closes its mount. When the daemon dies, every connection it served is
// aborted with it (the plugin keeps no copy of a descriptor), so readers get errors at once,
// never a hang; the plugin hands each staged volume over again once a daemon listens again.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cassfs/cassfs/handover"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/cassandra"
	"golang.org/x/sys/unix"
)

// Config configures the daemon.
type Config struct {
	// Socket is the hand-over socket to listen on.
	Socket string
	// DB is what every volume's database connection starts from (timeouts, bounds, TLS,
	// the default contact points); a volume's "hosts" attribute and its secrets
	// ("username", "password") complete it.
	DB cassandra.Config
	// LookaheadHelper runs the helper that looks names up ahead (see mount.Options).
	LookaheadHelper []string
	Log             *slog.Logger
	// Open, if set, opens a volume's dataset instead of the database (tests).
	Open func(ctx context.Context, v mount.Volume, secrets map[string]string) (store.Store, error)
}

// daemon is what Run serves.
type daemon struct {
	cfg      Config
	mu       sync.Mutex
	clusters map[clusterKey]*cassandra.Cluster // guarded by mu
	volumes  map[string]*volume                // guarded by mu: by volume id
}

type clusterKey struct{ hosts, username, password string }

// volume is one volume served.
type volume struct {
	dataset string
	m       *mount.Mount
	st      store.Store
	srv     *mount.Server
	once    sync.Once
}

// Run listens on cfg.Socket and serves every volume handed over until ctx ends.
func Run(ctx context.Context, cfg Config) error { return run(ctx, cfg, nil) }

// run is Run, telling started (tests) of the daemon it made once its socket listens.
func run(ctx context.Context, cfg Config, started func(*daemon)) error {
	d := &daemon{cfg: cfg, clusters: map[clusterKey]*cassandra.Cluster{}, volumes: map[string]*volume{}}
	if d.cfg.Open == nil {
		d.cfg.Open = d.openDB
	}
	l, err := handover.Listen(cfg.Socket)
	if err != nil {
		return err
	}
	if started != nil {
		started(d) // the socket takes connections from here
	}
	l.Rejected = func(err error) { cfg.Log.Warn("hand-over refused", "err", err) }
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	cfg.Log.Info("serving volumes", "socket", cfg.Socket)
	go mount.KeepMemoryLimit(ctx, d.mounts) // volumes and the streams read come and go
	var wg sync.WaitGroup
	for {
		req, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				cfg.Log.Error("hand-over socket", "err", err)
			}
			break
		}
		wg.Go(func() { d.serve(ctx, req) }) // a volume's dataset takes a while to open
	}
	d.stop()
	wg.Wait()
	return nil
}

// serve serves one volume handed over and answers the plugin.
func (d *daemon) serve(ctx context.Context, req *handover.Request) {
	id := req.Volume.ID
	log := d.cfg.Log.With("volume", id)
	v, err := d.open(ctx, req, log)
	if rerr := req.Reply(err); rerr != nil && err == nil {
		// The plugin gave up waiting and unmounts: the connection ends, and so does v.
		log.Warn("hand-over not answered in time", "err", rerr)
	}
	if err != nil {
		log.Error("volume not served", "err", err)
		return
	}
	log.Info("serving", "dataset", v.dataset, "at", req.Volume.Mountpoint)
	select {
	case <-v.srv.Done():
	case <-ctx.Done():
		return // stop ends it
	}
	d.mu.Lock()
	delete(d.volumes, id)
	d.mu.Unlock()
	v.close()
	d.setMemoryLimit()
	log.Info("volume ended", "at", req.Volume.Mountpoint)
}

// open opens the volume's dataset and serves its descriptor.
func (d *daemon) open(ctx context.Context, req *handover.Request, log *slog.Logger) (*volume, error) {
	spec, err := mount.VolumeFromAttributes(req.Volume.Attributes)
	if err != nil {
		unix.Close(req.FD)
		return nil, err
	}
	d.mu.Lock()
	_, dup := d.volumes[req.Volume.ID]
	d.mu.Unlock()
	if dup {
		unix.Close(req.FD)
		return nil, fmt.Errorf("volume %s is served already", req.Volume.ID)
	}
	st, err := d.cfg.Open(ctx, spec, req.Volume.Secrets)
	if err != nil {
		unix.Close(req.FD)
		return nil, fmt.Errorf("dataset %q: %w", spec.Dataset, err)
	}
	o := spec.Options
	o.LookaheadHelper = d.cfg.LookaheadHelper
	restore := mount.TightGC()
	m, err := mount.Open(ctx, st, o, log)
	restore()
	if err != nil {
		st.Close()
		unix.Close(req.FD)
		return nil, err
	}
	srv, err := m.ServeFD(ctx, req.FD, req.Volume.Mountpoint) // takes the descriptor
	if err != nil {
		m.Close()
		st.Close()
		return nil, err
	}
	v := &volume{dataset: spec.Dataset, m: m, st: st, srv: srv}
	d.mu.Lock()
	d.volumes[req.Volume.ID] = v
	d.mu.Unlock()
	if ctx.Err() != nil { // stopped meanwhile: stop missed it
		v.srv.Unmount()
		v.close()
		return nil, ctx.Err()
	}
	d.setMemoryLimit()
	return v, nil
}

// openDB opens the volume's dataset through the session of its cluster and login, made on
// first use.
func (d *daemon) openDB(ctx context.Context, v mount.Volume, secrets map[string]string) (store.Store, error) {
	key := clusterKey{v.Hosts, secrets["username"], secrets["password"]}
	d.mu.Lock()
	cl := d.clusters[key]
	d.mu.Unlock()
	if cl == nil {
		cfg := d.cfg.DB
		if v.Hosts != "" {
			cfg.Hosts = cassandra.ParseHosts(v.Hosts)
		}
		cfg.Username, cfg.Password = key.username, key.password
		cfg.Logger = d.cfg.Log
		var err error
		if cl, err = cassandra.Connect(cfg); err != nil {
			return nil, err
		}
		d.mu.Lock()
		if other := d.clusters[key]; other != nil {
			cl.Close()
			cl = other
		} else {
			d.clusters[key] = cl
		}
		d.mu.Unlock()
	}
	st, err := cl.Open(ctx, v.Dataset)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w; check the volume's dataset attribute", err)
	}
	return st, err
}

// served is how many volumes are served now.
func (d *daemon) served() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.volumes)
}

// mounts are the volumes served now.
func (d *daemon) mounts() []*mount.Mount {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ms []*mount.Mount
	for _, v := range d.volumes {
		ms = append(ms, v.m)
	}
	return ms
}

// setMemoryLimit sets the process's heap limit for the volumes served now.
func (d *daemon) setMemoryLimit() {
	if ms := d.mounts(); len(ms) > 0 {
		mount.SetMemoryLimit(ms...)
	}
}

// stop ends every volume (the connections end with the process anyway) and the sessions.
func (d *daemon) stop() {
	d.mu.Lock()
	vs := d.volumes
	d.volumes = map[string]*volume{}
	cls := d.clusters
	d.mu.Unlock()
	for _, v := range vs {
		v.srv.Unmount() // without the privilege it fails at once: the plugin unmounts
		v.close()
	}
	for _, cl := range cls {
		cl.Close()
	}
}

func (v *volume) close() {
	v.once.Do(func() {
		v.m.Close()
		v.st.Close()
	})
}
