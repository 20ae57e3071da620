package csi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cassfs/cassfs/handover"
	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/mount"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// samples is the size of every test dataset: sample i is storetest.MakeSample(dataset, i,
// i%2, 1000+i).
const samples = 20

// needFUSE skips a test that mounts, without root or /dev/fuse.
func needFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("staging mounts /dev/fuse and publishing bind-mounts: needs root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	f.Close()
}

// dataset is a small in-memory dataset named name.
func dataset(t *testing.T, name string) store.Store {
	t.Helper()
	st := memstore.New(name, memstore.Options{})
	testkit.Check(t, st.SetLabels(context.Background(), []string{"class0", "class1"}))
	for i := range samples {
		s, data := storetest.MakeSample(name, i, i%2, 1000+i)
		testkit.Check(t, st.Put(context.Background(), s, data, nil))
	}
	return st
}

// daemon is an in-test serving daemon: it serves each connection handed over with a
// real cassfs mount (mount.Open over an in-memory dataset, Mount.ServeFD), or refuses
// it with refuse.
type daemon struct {
	socket string
	refuse error
	wg     sync.WaitGroup
	served chan handover.Volume // each volume served
}

// startDaemon listens in a fresh directory until the test ends.
func startDaemon(t *testing.T, refuse error) *daemon {
	t.Helper()
	l := testkit.Must(handover.Listen(filepath.Join(t.TempDir(), "serve.sock")))(t)
	d := &daemon{socket: l.Path(), refuse: refuse, served: make(chan handover.Volume, 100)}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			req, err := l.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Error(err)
				}
				return
			}
			d.serve(t, req)
		}
	}()
	t.Cleanup(func() { l.Close(); d.wg.Wait() })
	return d
}

func (d *daemon) serve(t *testing.T, req *handover.Request) {
	fail := func(err error) {
		if err := req.Reply(err); err != nil {
			t.Error(err)
		}
	}
	v, err := mount.VolumeFromAttributes(req.Volume.Attributes)
	if err == nil {
		err = d.refuse
	}
	if err != nil {
		closeFD(t, req.FD)
		fail(err)
		return
	}
	v.Options.LookaheadHelper = nil
	m, err := mount.Open(context.Background(), dataset(t, v.Dataset), v.Options, slog.New(slog.DiscardHandler))
	if err != nil {
		closeFD(t, req.FD)
		fail(err)
		return
	}
	srv, err := m.ServeFD(context.Background(), req.FD, req.Volume.Mountpoint)
	if err != nil {
		m.Close()
		fail(err)
		return
	}
	// The test reads the mount from this process: see fs.FDServer.WaitMount.
	if err := srv.WaitMount(); err != nil {
		t.Error(err)
	}
	// Recorded before the reply: the test counts d.served as soon as the plugin's call
	// returns, and the plugin returns on the reply.
	d.served <- req.Volume
	fail(nil)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-srv.Done() // unstaged: the mounter unmounted
		m.Close()
	}()
}

func closeFD(t *testing.T, fd int) {
	if err := os.NewFile(uintptr(fd), "fuse").Close(); err != nil {
		t.Error(err)
	}
}

// startPlugin runs the plugin until the test ends, handing over to daemonSocket, and
// returns a client connection to it.
func startPlugin(t *testing.T, daemonSocket string) (endpoint string, conn *grpc.ClientConn) {
	t.Helper()
	return startPluginWith(t, Config{DaemonSocket: daemonSocket, HandoverTimeout: 5 * time.Second})
}

// startPluginWith is startPlugin with cfg (its endpoint, node id and log are filled in).
func startPluginWith(t *testing.T, cfg Config) (endpoint string, conn *grpc.ClientConn) {
	t.Helper()
	endpoint = filepath.Join(t.TempDir(), "csi.sock")
	cfg.Endpoint, cfg.NodeID, cfg.Log = endpoint, "node-1", slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	conn = testkit.Must(grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials())))(t)
	t.Cleanup(func() { conn.Close() })
	// Wait until the plugin serves.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for {
		if _, err := csi.NewIdentityClient(conn).Probe(ctx2, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err == nil {
			return endpoint, conn
		} else if ctx2.Err() != nil {
			t.Fatalf("the plugin does not serve: %v", err)
		}
	}
}

// mountCapability is what a pod's volume asks for.
var mountCapability = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
}
