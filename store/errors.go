package store

import (
	"context"
	"errors"
)

// ErrNotFound is wrapped by errors for samples, datasets, labels or splits that do not exist.
var ErrNotFound = errors.New("not found")

// ErrCorrupt is wrapped by errors for stored data that contradicts its metadata (size,
// label or checksum).
var ErrCorrupt = errors.New("stored data is corrupt")

// ErrExists is wrapped by errors for things that exist already (splits).
var ErrExists = errors.New("already exists")

// ErrUnavailable is wrapped by a backend's errors that mean no node could serve the request
// (no connection, not enough replicas alive).
var ErrUnavailable = errors.New("no node available")

// ErrTimeout is wrapped by a backend's errors for its own timeouts and the server's.
var ErrTimeout = errors.New("timed out")

// Error kinds, for metrics and logs (ErrorKind).
const (
	KindTimeout     = "timeout"     // the deadline passed
	KindUnavailable = "unavailable" // no node could serve the request
	KindMissing     = "missing"     // listed, but not in the blob table
	KindCorrupt     = "corrupt"     // blob contradicts its metadata (size, label, checksum)
	KindCanceled    = "canceled"    // the caller gave up
	KindOther       = "other"
)

// Kinds lists every kind ErrorKind returns.
var Kinds = []string{KindTimeout, KindUnavailable, KindMissing, KindCorrupt, KindCanceled, KindOther}

// ErrorKind classifies an error of a Store call.
func ErrorKind(err error) string {
	var netErr interface{ Timeout() bool }
	switch {
	case errors.Is(err, ErrCorrupt):
		return KindCorrupt
	case errors.Is(err, ErrNotFound):
		return KindMissing
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrTimeout), errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	case errors.Is(err, ErrUnavailable):
		return KindUnavailable
	}
	return KindOther
}

// KindError marks a backend's error with the kind it is of (ErrUnavailable, ErrTimeout),
// keeping the driver's own error and message: errors.Is finds both.
type KindError struct {
	Kind error // ErrUnavailable or ErrTimeout
	Err  error
}

func (e *KindError) Error() string   { return e.Err.Error() }
func (e *KindError) Unwrap() []error { return []error{e.Err, e.Kind} }
