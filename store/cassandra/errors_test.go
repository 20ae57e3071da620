package cassandra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store"
	"github.com/gocql/gocql"
)

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("get sample x: %w", store.ErrCorrupt), store.KindCorrupt},
		{fmt.Errorf("get sample x: %w", store.ErrNotFound), store.KindMissing},
		{fmt.Errorf("get sample x: %w", context.DeadlineExceeded), store.KindTimeout},
		{fmt.Errorf("get sample x: %w", gocql.ErrTimeoutNoResponse), store.KindTimeout},
		{&gocql.RequestErrReadTimeout{}, store.KindTimeout},
		{fmt.Errorf("get sample x: %w", context.Canceled), store.KindCanceled},
		{fmt.Errorf("get sample x: %w", gocql.ErrNoConnections), store.KindUnavailable},
		{&gocql.RequestErrUnavailable{}, store.KindUnavailable},
		{errors.New("boom"), store.KindOther},
	} {
		// As the backend returns them: marked with their kind, wrapped with their key.
		err := fmt.Errorf("get sample x: %w", kinded(tc.err))
		if got := store.ErrorKind(err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) && !errors.As(err, new(*gocql.RequestErrUnavailable)) && !errors.As(err, new(*gocql.RequestErrReadTimeout)) {
			t.Errorf("kinded(%v) lost the driver's error", tc.err)
		}
		if err.Error() != "get sample x: "+tc.err.Error() {
			t.Errorf("kinded changed the message: %q", err.Error())
		}
	}
}

// A request that finds no connection, or loses it, is sent again within its deadline;
// anything else is returned at once.
func TestAgainWaitsForAConnection(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, lost := range []error{gocql.ErrNoConnections, gocql.ErrConnectionClosed, io.EOF, reset,
		// As gocql 1.7 returns a connection closed mid-frame: flattened into text.
		fmt.Errorf("unable to read frame body: read 65407/93581 bytes: %v", io.ErrUnexpectedEOF),
		fmt.Errorf("unable to read frame header: %v", reset)} {
		calls := 0
		err := again(context.Background(), func() error {
			if calls++; calls < 4 {
				return lost
			}
			return nil
		})
		if err != nil || calls != 4 {
			t.Errorf("after three failures with %v: %v after %d calls, want success after 4", lost, err, calls)
		}
	}
	for _, other := range []error{gocql.ErrNotFound, &gocql.RequestErrReadTimeout{}, errors.New("boom"), context.DeadlineExceeded} {
		calls := 0
		if err := again(context.Background(), func() error { calls++; return other }); !errors.Is(err, other) && err != other || calls != 1 {
			t.Errorf("%v: %v after %d calls, want it at once", other, err, calls)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	calls := 0
	err := again(ctx, func() error { calls++; return gocql.ErrNoConnections })
	if !errors.Is(err, gocql.ErrNoConnections) || calls < 2 {
		t.Errorf("no connection until the deadline: %v after %d calls, want the driver's error after a few", err, calls)
	}
}
