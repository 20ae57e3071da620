package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultReadTimeout is a Listener's Timeout unless set.
const DefaultReadTimeout = 10 * time.Second

// maxErrorMessage bounds the reason a Reply sends.
const maxErrorMessage = 4 << 10

// Listener is the daemon's end: it accepts one Request per connection. Accept is not
// safe for concurrent use; Close is, and ends an Accept in progress.
type Listener struct {
	// Timeout bounds reading a request once a connection is accepted
	// (DefaultReadTimeout if zero). Requests are read one at a time, so a silent peer
	// holds up the next for that long at most.
	Timeout time.Duration
	// Rejected, if set, is told why each request Accept refused was refused (the peer
	// has been told too). Its errors never contain the volume's secrets.
	Rejected func(error)

	l    *net.UnixListener
	path string
}

// Listen listens at path, a Unix socket it makes with mode 0600 (only its owner and root
// may connect), replacing a socket left there by a daemon that is gone, and removes it at
// Close. The owner of the socket is who the mounter mounts connections for (their
// user_id and group_id).
func Listen(path string) (*Listener, error) {
	path = filepath.Clean(path)
	addr := &net.UnixAddr{Name: path, Net: "unixpacket"}
	l, err := net.ListenUnix("unixpacket", addr)
	if errors.Is(err, unix.EADDRINUSE) && stale(path) {
		if rmErr := os.Remove(path); rmErr == nil {
			l, err = net.ListenUnix("unixpacket", addr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listen for hand-overs: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen for hand-overs: %w", err)
	}
	return &Listener{l: l, path: path}, nil
}

// stale reports whether path is a socket nobody listens on.
func stale(path string) bool {
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return false
	}
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, unix.ECONNREFUSED)
}

// Path is where l listens.
func (l *Listener) Path() string { return l.path }

// Close stops listening and removes the socket. Requests already accepted are not
// affected.
func (l *Listener) Close() error { return l.l.Close() }

// Accept waits for the next well-formed request and returns it: the caller serves its
// FD or closes it, and answers with Reply. A malformed request (not one descriptor, not
// /dev/fuse's business to judge here, bad JSON, another protocol version, no volume id
// or a relative mountpoint, too long, too slow) is refused: the peer is told why, the
// descriptors it sent are closed, Rejected is told, and Accept waits for the next. Accept
// returns an error only when listening failed or l was closed (net.ErrClosed).
func (l *Listener) Accept() (*Request, error) {
	for {
		conn, err := l.l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		r, err := l.read(conn)
		if err == nil {
			return r, nil
		}
		err = fmt.Errorf("refused a hand-over: %w", err)
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		writeReply(conn, err)
		conn.Close()
		if l.Rejected != nil {
			l.Rejected(err)
		}
	}
}

// read reads conn's request. On an error, every descriptor received is closed.
func (l *Listener) read(conn *net.UnixConn) (_ *Request, err error) {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	buf := make([]byte, maxMessage+1)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room for 4 descriptors: more than one is refused
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	received := time.Now()
	fds := descriptors(oob[:oobn])
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}()
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the request: %w", err)
	case n == 0:
		return nil, errors.New("the peer sent nothing")
	case flags&unix.MSG_TRUNC != 0 || n > maxMessage:
		return nil, fmt.Errorf("the request is over %d bytes", maxMessage)
	case flags&unix.MSG_CTRUNC != 0 || len(fds) != 1:
		return nil, fmt.Errorf("the request has %d descriptors attached (or more), want 1", len(fds))
	}
	var req request
	if err := json.Unmarshal(buf[:n], &req); err != nil {
		return nil, fmt.Errorf("the request is not JSON of one: %w", err)
	}
	switch v := req.Volume; {
	case req.Version != Version:
		return nil, fmt.Errorf("the peer speaks version %d of the protocol, not %d", req.Version, Version)
	case v.ID == "":
		return nil, errors.New("the request has no volume id")
	case !filepath.IsAbs(v.Mountpoint):
		return nil, fmt.Errorf("volume %s: mountpoint %q is not an absolute path", v.ID, v.Mountpoint)
	case req.WaitMillis <= 0:
		return nil, fmt.Errorf("volume %s: the peer waits %d ms for the answer", v.ID, req.WaitMillis)
	}
	r := &Request{FD: fds[0], Volume: req.Volume, Deadline: received.Add(time.Duration(req.WaitMillis) * time.Millisecond), conn: conn}
	if raw, err := conn.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				r.PeerPID, r.PeerUID = int(cred.Pid), int(cred.Uid)
			}
		})
	}
	return r, nil
}

// descriptors returns the descriptors passed in oob.
func descriptors(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// Request is a connection handed over. The daemon serves FD at Volume.Mountpoint (or
// closes it) and calls Reply exactly once, before Deadline.
type Request struct {
	// FD is the /dev/fuse descriptor, the daemon's own now (close-on-exec, as received).
	// Accept does not check that it is /dev/fuse: serving it does (fs.ServeFD).
	FD     int
	Volume Volume
	// Deadline is when the mounter stops waiting for the answer and unmounts.
	Deadline time.Time
	// PeerUID and PeerPID are the mounter's, as the kernel saw them at connect
	// (SO_PEERCRED).
	PeerUID, PeerPID int

	conn *net.UnixConn
	once sync.Once
}

// Reply answers the mounter: nil when the daemon serves the connection, or why it does
// not (the mounter's NodeStageVolume then fails with that message, so it must not contain
// secrets). It closes the connection. An error means the answer did not arrive (the
// mounter gave up, see Deadline): the mounter then unmounts, and the daemon should stop
// serving. A second call does nothing and returns an error.
func (r *Request) Reply(err error) error {
	replied := errors.New("already replied")
	r.once.Do(func() {
		defer r.conn.Close()
		if replied = r.conn.SetWriteDeadline(r.Deadline); replied == nil {
			replied = writeReply(r.conn, err)
		}
		if replied != nil {
			replied = fmt.Errorf("answer the hand-over of volume %s: %w", r.Volume.ID, replied)
		}
	})
	return replied
}

func writeReply(conn *net.UnixConn, err error) error {
	rep := reply{Version: Version}
	if err != nil {
		rep.Error = err.Error()
		if rep.Error == "" {
			rep.Error = "refused"
		}
		if len(rep.Error) > maxErrorMessage {
			rep.Error = rep.Error[:maxErrorMessage] + "..."
		}
	}
	body, jerr := json.Marshal(rep)
	if jerr != nil {
		return jerr
	}
	_, werr := conn.Write(body)
	return werr
}
