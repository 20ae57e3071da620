package fs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// errorLog logs a failing sample once per window, however many READs fail on it: the kernel
// retries a failed readahead page by page, and several readers may wait on one fetch.
type errorLog struct {
	log    *slog.Logger
	window time.Duration

	mu   sync.Mutex
	last map[uint32]time.Time // guarded by mu; when each sample's failure was last logged
}

func (l *errorLog) first(i uint32) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[i]; ok && now.Sub(t) < l.window {
		return false
	}
	if l.last == nil || len(l.last) > 4096 {
		l.last = map[uint32]time.Time{} // forget old entries wholesale; at worst a line repeats
	}
	l.last[i] = now
	return true
}

// errno maps a data-path error to an errno; it is the only place that does. A cancelled
// request (the reader was interrupted) is EINTR; anything else — a timeout, an unreachable
// database, a corrupt or missing blob — is EIO, logged once with the operation, the sample
// and the cause.
func (f *FS) errno(op string, i uint32, err error) syscall.Errno {
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	if f.errLog.first(i) {
		f.errLog.log.Error("I/O error", "op", op, "sample", f.ix.ID(i).String(), "name", f.ix.Name(i), "err", err)
	}
	return syscall.EIO
}
