package cassandra

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
