package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
)

// errorLog logs each failure once with its cause.
type errorLog struct {
	log *slog.Logger
}

// firstReporter is an error shared by every reader that waited for one failed fetch; only
// the first to map it logs it (prefetch.FetchError).
type firstReporter interface{ FirstReport() bool }

// errno maps a data-path error to an errno; it is the only place that does. A cancelled
// request (the reader was interrupted) is EINTR; anything else — a timeout, an unreachable
// database, a corrupt or missing blob — is EIO, logged once with the operation, the sample
// and the cause.
func (f *FS) errno(op string, i uint32, err error) syscall.Errno {
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	var fr firstReporter
	if !errors.As(err, &fr) || fr.FirstReport() {
		f.errLog.log.Error("I/O error", "op", op, "sample", f.ix.ID(i).String(), "name", f.ix.Name(i), "err", err)
	}
	return syscall.EIO
}
