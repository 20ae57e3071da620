package store

import (
	"context"
	"slices"
	"sync"
)

// Attempts is what the attempts of one read share, so that a backend which picks a replica
// per call sends a second attempt to a replica the first did not ask: a hedge
// (store/hedge) exists for the case where the first replica is stuck (a frozen node keeps
// its connections open and answers nothing), and a second attempt that picked the same
// replica at random (one chance in three with three replicas) waits as long as the first.
// Replicas are named by the backend (store/cassandra: host IDs). It is safe for concurrent
// use.
type Attempts struct {
	mu    sync.Mutex
	asked []string // guarded by mu; replicas asked so far, in order
}

// Ask records that an attempt sends its request to replica, and reports whether no
// attempt of the read asked it before.
func (a *Attempts) Ask(replica string) (first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Contains(a.asked, replica) {
		return false
	}
	a.asked = append(a.asked, replica)
	return true
}

type attemptsKey struct{}

// WithAttempts returns ctx carrying a: the attempts of one read made with it share a.
func WithAttempts(ctx context.Context, a *Attempts) context.Context {
	return context.WithValue(ctx, attemptsKey{}, a)
}

// AttemptsOf returns the Attempts ctx carries, or nil.
func AttemptsOf(ctx context.Context) *Attempts {
	a, _ := ctx.Value(attemptsKey{}).(*Attempts)
	return a
}
