package cassandra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/cassfs/cassfs/store"

	"github.com/gocql/gocql"
)

// kinded marks err with the kind the driver's error is of (store.ErrUnavailable,
// store.ErrTimeout), so that store.ErrorKind classifies it without knowing gocql. Its
// message is unchanged.
func kinded(err error) error {
	switch {
	case err == nil:
		return nil
	case isUnavailable(err):
		return &store.KindError{Kind: store.ErrUnavailable, Err: err}
	case isTimeout(err):
		return &store.KindError{Kind: store.ErrTimeout, Err: err}
	}
	return err
}

// isUnavailable reports errors that mean no node could serve a request.
func isUnavailable(err error) bool {
	var ue *gocql.RequestErrUnavailable
	return errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.As(err, &ue)
}

// lostConnection reports errors of a request that found no connection to send it on (the
// pool empty for a moment: a reset link, a node restarting) or whose connection closed
// before the answer came (gocql 1.7 fails every request of a closed connection with the
// error that closed it: conn.go, closeWithError). The request itself may be sent again.
// A connection closed mid-frame reaches us flattened into text ("unable to read frame
// body: read 65407/93581 bytes: unexpected EOF", frame.go, readFrame formats with %v), so
// it is recognised by its message.
func lostConnection(err error) bool {
	if errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "unable to read frame") || strings.HasSuffix(msg, io.EOF.Error()) ||
		strings.HasSuffix(msg, syscall.ECONNRESET.Error()) || strings.HasSuffix(msg, syscall.EPIPE.Error())
}

// again runs op, an idempotent request, and sends it again while it fails for want of a
// connection (lostConnection), waiting between tries (10 ms, doubling up to
// reconnectInterval) for the driver to reconnect, until ctx's deadline leaves no room for
// another wait: a disturbance shorter than the deadline costs the request time, not an
// error. Any other outcome is returned at once.
func again(ctx context.Context, op func() error) error {
	wait := 10 * time.Millisecond
	for {
		err := op()
		if err == nil || !lostConnection(err) {
			return err
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, reconnectInterval)
	}
}

// isTimeout reports the driver's own timeouts and the server's.
func isTimeout(err error) bool {
	var rt *gocql.RequestErrReadTimeout
	return errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.As(err, &rt)
}

// driverLogger is a session's gocql logger (ClusterConfig.Logger): the driver's own
// messages, at level Warn, to the store's Config.Logger.
type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "from", "gocql")
}
func (l driverLogger) Printf(format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "gocql")
}
func (l driverLogger) Println(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...)), "from", "gocql")
}
