package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/cassfs/cassfs/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Several is one process serving one or more datasets. One dataset is served at the
// mountpoint itself, as it always was; several are served at <mountpoint>/<dataset>, each
// an ordinary mount (its own FUSE connection, tree, control socket and `cassfs stats`), so
// readers see exactly what a mount of that dataset alone shows. They share what a process
// has once: the stores' database session (cassandra.Cluster), the memory limit
// (SetMemoryLimit over all of them) and the cache directory (a subdirectory per dataset);
// --cache-size and --cache-dir-size are the process's, split evenly among the datasets.
//
// Why not one tree with the datasets as directories of one connection: every sample's
// inode number is its index in its dataset, and the page-cache pushes and the helper that
// looks names up ahead address samples by it; separate connections keep each dataset's
// numbers its own at the cost of one mount table entry per dataset.
type Several struct {
	Mounts  []*Mount
	servers []*Server
	made    []string // directories made for the datasets, removed at unmount
	done    chan struct{}
	once    sync.Once // closes done
}

// OpenSeveral opens a Mount of each store's dataset with o, its cache bounds split evenly.
// The stores stay the caller's.
func OpenSeveral(ctx context.Context, stores []store.Store, o Options, log *slog.Logger) (*Several, error) {
	if len(stores) == 0 {
		return nil, errors.New("no dataset to mount")
	}
	n := len(stores)
	seen := map[string]bool{}
	for _, st := range stores {
		if seen[st.Dataset()] {
			return nil, &OptionError{fmt.Errorf("--dataset names %s twice", st.Dataset())}
		}
		seen[st.Dataset()] = true
	}
	o.CacheBytes = max(o.CacheBytes/uint64(n), 1)
	if o.CacheDirBytes > 0 {
		o.CacheDirBytes = max(o.CacheDirBytes/int64(n), 1)
	}
	s := &Several{done: make(chan struct{})}
	for _, st := range stores {
		m, err := Open(ctx, st, o, log)
		if err != nil {
			s.Close()
			if n > 1 {
				err = fmt.Errorf("dataset %s: %w", st.Dataset(), err)
			}
			return nil, err
		}
		s.Mounts = append(s.Mounts, m)
	}
	return s, nil
}

// ServeMetrics answers /metrics on addr until ctx ends (see Mount.ServeMetrics); with
// several datasets, each dataset's at /metrics/<dataset> (the series of one mount, as a
// mount of it alone shows them).
func (s *Several) ServeMetrics(ctx context.Context, addr string) error {
	if len(s.Mounts) == 1 {
		return s.Mounts[0].ServeMetrics(ctx, addr)
	}
	ln, err := net.Listen("tcp", metricsAddr(addr))
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	regs := map[string]*prometheus.Registry{}
	for _, m := range s.Mounts {
		regs["/metrics/"+m.dataset] = m.metrics.reg
		m.log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics/"+m.dataset)
	}
	serveMetrics(ctx, ln, s.Mounts[0].log, s.Mounts[0].opts.Pprof, regs)
	return nil
}

// Serve serves one dataset at dir, or each of several at dir/<dataset> (made if missing).
// Done is closed once any of them is unmounted from outside.
func (s *Several) Serve(ctx context.Context, dir string) error {
	for _, m := range s.Mounts {
		at := dir
		if len(s.Mounts) > 1 {
			at = filepath.Join(dir, m.dataset)
			if err := os.Mkdir(at, 0o755); err == nil {
				s.made = append(s.made, at)
			} else if !errors.Is(err, os.ErrExist) {
				s.Unmount()
				return fmt.Errorf("mountpoint of dataset %s: %w", m.dataset, err)
			}
			var err error
			if at, err = PrepareMountpoint(at, m.log); err != nil {
				s.Unmount()
				return err
			}
		}
		if len(s.Mounts) > 1 && m.opts.RecordsAt != "" {
			m.opts.RecordsAt = filepath.Join(m.opts.RecordsAt, m.dataset)
			if err := os.Mkdir(m.opts.RecordsAt, 0o755); err == nil {
				s.made = append(s.made, m.opts.RecordsAt)
			} else if !errors.Is(err, os.ErrExist) {
				s.Unmount()
				return fmt.Errorf("record view mountpoint of dataset %s: %w", m.dataset, err)
			}
		}
		srv, err := m.Serve(ctx, at)
		if err != nil {
			s.Unmount()
			return err
		}
		s.servers = append(s.servers, srv)
	}
	for _, srv := range s.servers {
		go func() {
			select {
			case <-srv.Done():
				s.closeDone()
			case <-s.done:
			}
		}()
	}
	return nil
}

func (s *Several) closeDone() { s.once.Do(func() { close(s.done) }) }

// Done is closed once a dataset's mount is gone (unmounted from outside, or Unmount).
func (s *Several) Done() <-chan struct{} { return s.done }

// Unmount unmounts every dataset served (see Server.Unmount) and removes the directories
// Serve made, trying every one; the errors are returned joined.
func (s *Several) Unmount() error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Unmount())
	}
	for _, d := range s.made {
		errs = append(errs, os.Remove(d))
	}
	s.servers, s.made = nil, nil
	s.closeDone()
	return errors.Join(errs...)
}

// Close closes every Mount (after Unmount).
func (s *Several) Close() {
	for _, m := range s.Mounts {
		m.Close()
	}
}
