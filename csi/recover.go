package csi

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// staged is a volume this plugin staged: what it needs to stage it again.
type staged struct {
	req     *csi.NodeStageVolumeRequest
	staging string
	source  string
	targets map[string]bool // published at
}

// RecoverEvery is how often the plugin looks for staged volumes whose serving daemon died.
const RecoverEvery = 2 * time.Second

// recoverLoop serves again the staged volumes whose daemon died, once a daemon listens
// again: each gets a new connection, mounted at its staging path and handed over, and its
// targets are bound to it anew (the old binds lead to a connection nobody serves). Readers
// of a running container see the new mount where its volume mount propagates from the
// host (mountPropagation: HostToContainer); otherwise the pod gets errors until it is
// restarted. The plugin knows what it staged from its own calls: a plugin restarted too
// recovers nothing (kubelet stages and publishes again only new pods' volumes).
func (d *driver) recoverLoop(ctx context.Context) {
	t := time.NewTicker(RecoverEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		var dead []string
		for id, s := range d.staged {
			// statfs always asks the server (a stat may be answered from cached attributes).
			var fs unix.Statfs_t
			if err := unix.Statfs(s.staging, &fs); errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) {
				dead = append(dead, id)
			}
		}
		d.mu.Unlock()
		if len(dead) == 0 {
			continue
		}
		if _, err := os.Stat(d.cfg.DaemonSocket); err != nil {
			continue // no daemon yet
		}
		for _, id := range dead {
			if err := d.restage(ctx, id); err != nil {
				d.log.Warn("serve a staged volume again", "volume", id, "err", err)
			}
		}
	}
}

// restage stages volume id again and binds its targets to the new mount.
func (d *driver) restage(ctx context.Context, id string) error {
	release, err := d.hold(id)
	if err != nil {
		return err // a call on it is in progress: next round
	}
	defer release()
	d.mu.Lock()
	s := d.staged[id]
	var targets []string
	if s != nil {
		for t := range s.targets {
			targets = append(targets, t)
		}
	}
	d.mu.Unlock()
	if s == nil {
		return nil // unstaged meanwhile
	}
	for _, t := range targets {
		unmountAll(t)
	}
	if err := unmount(s.staging); err != nil {
		return err
	}
	if err := d.stage(ctx, s.req, s.staging, s.source); err != nil {
		return err
	}
	for _, t := range targets {
		if err := bind(s.staging, t); err != nil {
			return err
		}
	}
	d.log.Info("staged volume served again", "volume", id, "targets", len(targets))
	return nil
}

// remember records a staged volume; forget drops it.
func (d *driver) remember(id string, s *staged) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.staged[id]; old != nil {
		s.targets = old.targets
	}
	d.staged[id] = s
}

func (d *driver) forget(id string) {
	d.mu.Lock()
	delete(d.staged, id)
	d.mu.Unlock()
}

// published records (on) or drops a target of volume id.
func (d *driver) published(id, target string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.staged[id]; s != nil {
		if on {
			s.targets[target] = true
		} else {
			delete(s.targets, target)
		}
	}
}
