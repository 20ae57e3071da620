package handover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
	"golang.org/x/sys/unix"
)

// listen listens in a fresh directory and closes the listener at cleanup.
func listen(t *testing.T) *Listener {
	t.Helper()
	l := testkit.Must(Listen(filepath.Join(t.TempDir(), "serve.sock")))(t)
	t.Cleanup(func() { l.Close() })
	return l
}

// pipe returns a pipe's ends, closed at cleanup unless closed before.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	testkit.Check(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

func volume() Volume {
	return Volume{ID: "vol-1", Mountpoint: "/var/lib/kubelet/staging/vol-1",
		Attributes: map[string]string{"dataset": "tiles", "seed": "7"},
		Secrets:    Secrets{"password": "hunter2"}}
}

// TestHandOver: the descriptor the mounter sends is the one the daemon receives (what
// the daemon writes to it comes out of the mounter's pipe), close-on-exec; the volume
// arrives whole, secrets included; the peer is who connected; the mounter hears
// "serving" as nil and a refusal as a *RefusedError with the daemon's reason.
func TestHandOver(t *testing.T) {
	l := listen(t)
	if fi := testkit.Must(os.Stat(l.Path()))(t); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	for _, refuse := range []error{nil, errors.New("dataset tiles: no such keyspace")} {
		r, w := pipe(t)
		got := make(chan *Request, 1)
		go func() {
			req, err := l.Accept()
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- req
			if _, err := unix.Write(req.FD, []byte("served")); err != nil {
				t.Error(err)
			}
			unix.Close(req.FD)
			if err := req.Reply(refuse); err != nil {
				t.Error(err)
			}
		}()
		err := Send(context.Background(), l.Path(), w, volume())
		unix.Close(w)
		req := <-got
		if req == nil {
			t.FailNow()
		}
		var refused *RefusedError
		switch {
		case refuse == nil && err != nil:
			t.Errorf("Send: %v, want nil", err)
		case refuse != nil && (!errors.As(err, &refused) || refused.Message != refuse.Error()):
			t.Errorf("Send: %v, want a *RefusedError saying %q", err, refuse)
		}
		buf := make([]byte, 16)
		n, err := unix.Read(r, buf)
		testkit.Check(t, err)
		if string(buf[:n]) != "served" {
			t.Errorf("read %q from the pipe, want what the daemon wrote to the descriptor it received", buf[:n])
		}
		if a, b := fmt.Sprint(req.Volume.Attributes), fmt.Sprint(volume().Attributes); req.Volume.ID != "vol-1" || req.Volume.Mountpoint != volume().Mountpoint || a != b || req.Volume.Secrets["password"] != "hunter2" {
			t.Errorf("received %+v (secrets %d), want %+v", req.Volume, len(req.Volume.Secrets), volume())
		}
		if req.PeerUID != os.Getuid() || req.PeerPID != os.Getpid() {
			t.Errorf("peer uid %d pid %d, want %d %d", req.PeerUID, req.PeerPID, os.Getuid(), os.Getpid())
		}
		if until := time.Until(req.Deadline); until <= 0 || until > DefaultTimeout {
			t.Errorf("deadline in %v, want within DefaultTimeout", until)
		}
		if err := req.Reply(nil); err == nil {
			t.Error("a second Reply succeeded")
		}
	}
}

// TestReceivedDescriptorIsCloseOnExec: a daemon must not pass the connection on to what
// it starts.
func TestReceivedDescriptorIsCloseOnExec(t *testing.T) {
	l := listen(t)
	_, w := pipe(t)
	testkit.Check(t, unix.SetNonblock(w, false))
	done := make(chan error, 1)
	go func() { done <- Send(context.Background(), l.Path(), w, volume()) }()
	req := testkit.Must(l.Accept())(t)
	defer unix.Close(req.FD)
	flags := testkit.Must(unix.FcntlInt(uintptr(req.FD), unix.F_GETFD, 0))(t)
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("the received descriptor is inheritable")
	}
	testkit.Check(t, req.Reply(nil))
	testkit.Check(t, <-done)
}

// TestSilentDaemon: a daemon that accepts (or whose socket queues the connection) and
// never answers costs Send its context's deadline, and no more.
func TestSilentDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "silent.sock")
	raw := testkit.Must(net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"}))(t)
	defer raw.Close() // never accepts: the kernel queues the connection and the message
	_, w := pipe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Send(ctx, path, w, volume())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send to a silent daemon: %v, want a deadline exceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Send took %v, want about its 200ms deadline", took)
	}
	if err := Send(context.Background(), filepath.Join(t.TempDir(), "none.sock"), w, volume()); err == nil {
		t.Error("Send with no daemon succeeded")
	}
}

// TestBadPeers: requests that are not well formed are refused, telling the peer why,
// closing what descriptors they carried (the other end of a pipe sent then sees EOF),
// telling Rejected, and Accept goes on to return the next good request.
func TestBadPeers(t *testing.T) {
	l := listen(t)
	l.Timeout = 200 * time.Millisecond
	rejected := make(chan error, 10)
	l.Rejected = func(err error) { rejected <- err }
	good := testkit.Must(json.Marshal(request{Version: Version, Volume: volume(), WaitMillis: 1000}))(t)
	withBody := func(f func(*request)) []byte {
		req := request{Version: Version, Volume: volume(), WaitMillis: 1000}
		f(&req)
		return testkit.Must(json.Marshal(req))(t)
	}
	for _, tc := range []struct {
		name  string
		body  []byte
		fds   int
		quiet bool // sends nothing
		want  string
	}{
		{name: "no descriptor", body: good, fds: 0, want: "0 descriptors"},
		{name: "two descriptors", body: good, fds: 2, want: "2 descriptors"},
		{name: "not JSON", body: []byte("{volume"), fds: 1, want: "not JSON"},
		{name: "another version", body: withBody(func(r *request) { r.Version = 2 }), fds: 1, want: "version 2"},
		{name: "no volume id", body: withBody(func(r *request) { r.Volume.ID = "" }), fds: 1, want: "no volume id"},
		{name: "relative mountpoint", body: withBody(func(r *request) { r.Volume.Mountpoint = "staging" }), fds: 1, want: "not an absolute path"},
		{name: "too long", body: bytes.Repeat([]byte(" "), maxMessage+10), fds: 1, want: "over"},
		{name: "silent", quiet: true, want: "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := testkit.Must(net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: l.Path(), Net: "unixpacket"}))(t)
			defer conn.Close()
			var readEnds []int
			if !tc.quiet {
				var fds []int
				for range tc.fds {
					r, w := pipe(t)
					fds, readEnds = append(fds, w), append(readEnds, r)
				}
				var oob []byte
				if len(fds) > 0 {
					oob = unix.UnixRights(fds...)
				}
				if _, _, err := conn.WriteMsgUnix(tc.body, oob, nil); err != nil {
					t.Fatal(err)
				}
				for _, fd := range fds {
					unix.Close(fd)
				}
			}
			accepted := make(chan *Request, 1)
			go func() {
				if req, err := l.Accept(); err == nil {
					accepted <- req
				}
				close(accepted)
			}()
			err := <-rejected
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rejected with %q, want it to say %q", err, tc.want)
			}
			if !tc.quiet {
				buf := make([]byte, 1024)
				n := testkit.Must(conn.Read(buf))(t)
				var rep reply
				if json.Unmarshal(buf[:n], &rep) != nil || !strings.Contains(rep.Error, tc.want) {
					t.Errorf("the peer was told %q, want it to say %q", buf[:n], tc.want)
				}
			}
			for _, r := range readEnds {
				testkit.Check(t, unix.SetNonblock(r, true)) // EAGAIN, not a hang, if still open
				if n, err := unix.Read(r, make([]byte, 1)); n != 0 || err != nil {
					t.Errorf("the descriptor sent is still open in the daemon (read %d, %v; want EOF)", n, err)
				}
			}
			// Accept goes on: the next good request is returned.
			_, w := pipe(t)
			sent := make(chan error, 1)
			go func() { sent <- Send(context.Background(), l.Path(), w, volume()) }()
			req := <-accepted
			if req == nil {
				t.Fatal("Accept returned no request after a bad one")
			}
			unix.Close(req.FD)
			testkit.Check(t, req.Reply(nil))
			testkit.Check(t, <-sent)
		})
	}
}

// TestStaleSocket: a socket left by a daemon that is gone is replaced; one a live daemon
// listens on is not.
func TestStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.sock")
	live := testkit.Must(Listen(path))(t)
	if l, err := Listen(path); err == nil {
		l.Close()
		t.Fatal("a second Listen took a live daemon's socket")
	}
	fd := testkit.Must(unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0))(t)
	live.Close()
	// What a killed daemon leaves: a bound socket file nobody listens on.
	testkit.Check(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
	unix.Close(fd)
	l := testkit.Must(Listen(path))(t)
	l.Close()
}

// TestSecretsNeverShown: no fmt verb, no slog handler and no error shows a secret's value.
func TestSecretsNeverShown(t *testing.T) {
	v := volume()
	var out bytes.Buffer
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		fmt.Fprintf(&out, format+"\n", v)
		fmt.Fprintf(&out, format+"\n", v.Secrets)
		fmt.Fprintf(&out, format+"\n", &v)
	}
	fmt.Fprintln(&out, fmt.Errorf("volume %v", v))
	slog.New(slog.NewJSONHandler(&out, nil)).Info("volume", "v", v, "s", v.Secrets)
	slog.New(slog.NewTextHandler(&out, nil)).Info("volume", "v", v, "s", v.Secrets)
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("a secret shows:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "[1 secrets]") || !strings.Contains(out.String(), "tiles") {
		t.Errorf("the volume does not show (its attributes and secrets' count):\n%s", out.String())
	}
}
