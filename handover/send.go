package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Send hands fd, an open /dev/fuse descriptor mounted at v.Mountpoint, to the daemon
// listening at socketPath, and waits for its answer: nil once the daemon serves the
// connection, a *RefusedError with the daemon's reason when it does not, or another error
// when the exchange failed (no daemon, a broken or silent one). The whole exchange ends
// by ctx's deadline, or after DefaultTimeout if ctx has none, with an error wrapping
// context.DeadlineExceeded.
//
// Send does not close fd; the caller closes its copy once Send returns. After an error
// the daemon may or may not hold a copy: the caller unmounts v.Mountpoint, which ends
// the connection either way.
func Send(ctx context.Context, socketPath string, fd int, v Volume) error {
	if err := send(ctx, socketPath, fd, v); err != nil {
		return fmt.Errorf("hand volume %s over to %s: %w", v.ID, socketPath, err)
	}
	return nil
}

func send(ctx context.Context, socketPath string, fd int, v Volume) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	body, err := json.Marshal(request{Version: Version, Volume: v, WaitMillis: time.Until(deadline).Milliseconds()})
	if err != nil {
		return err
	}
	if len(body) > maxMessage {
		return fmt.Errorf("the volume's description is %d bytes, over the %d a message may hold", len(body), maxMessage)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", socketPath)
	if err != nil {
		return err
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	// A cancelled context ends a read or write in progress.
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })()
	failed := func(step string, err error) error {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%s: %w (%w)", step, ctx.Err(), err)
		case errors.Is(err, os.ErrDeadlineExceeded): // the connection's deadline is ctx's
			return fmt.Errorf("%s: %w (%w)", step, context.DeadlineExceeded, err)
		}
		return fmt.Errorf("%s: %w", step, err)
	}
	if _, _, err := conn.WriteMsgUnix(body, unix.UnixRights(fd), nil); err != nil {
		return failed("send", err)
	}
	buf := make([]byte, maxMessage+1)
	n, _, flags, _, err := conn.ReadMsgUnix(buf, nil)
	switch {
	case err != nil:
		return failed("wait for the answer", err)
	case n == 0:
		return errors.New("wait for the answer: the daemon closed the connection without answering")
	case flags&unix.MSG_TRUNC != 0 || n > maxMessage:
		return errors.New("wait for the answer: the answer is too long")
	}
	var r reply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return fmt.Errorf("the daemon's answer is not one: %w", err)
	}
	if r.Version != Version {
		return fmt.Errorf("the daemon speaks version %d of the protocol, not %d", r.Version, Version)
	}
	if r.Error != "" {
		return &RefusedError{Message: r.Error}
	}
	return nil
}
