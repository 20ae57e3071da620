package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"
)

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("get sample x: %w", ErrCorrupt), KindCorrupt},
		{fmt.Errorf("get sample x: %w", ErrNotFound), KindMissing},
		{fmt.Errorf("get sample x: %w", context.DeadlineExceeded), KindTimeout},
		{fmt.Errorf("get sample x: %w", gocql.ErrTimeoutNoResponse), KindTimeout},
		{fmt.Errorf("get sample x: %w", context.Canceled), KindCanceled},
		{fmt.Errorf("get sample x: %w", gocql.ErrNoConnections), KindUnavailable},
		{&gocql.RequestErrUnavailable{}, KindUnavailable},
		{errors.New("boom"), KindOther},
	} {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
