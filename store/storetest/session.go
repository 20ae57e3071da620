package storetest

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/inflight"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// Session is a fake of one database session that several stores read through, as
// store/cassandra's Cluster is: at most a bound of reads in flight at once (more wait, in
// order), each taking Latency, and the bound on prefetches that the session's stores share
// (PrefetchBound, store/cassandra's PrefetchShare of the bound). It records which reads had
// to wait for a slot.
type Session struct {
	Latency time.Duration
	slots   chan struct{}
	bound   *inflight.Bound
	active  atomic.Int64
	queued  atomic.Int64
	waited  sync.Map // uuid.UUID → true: the read waited for a slot
}

// NewSession returns a session of maxInFlight slots whose prefetches may hold
// prefetchShare of them.
func NewSession(maxInFlight, prefetchShare int, latency time.Duration) *Session {
	return &Session{Latency: latency, slots: make(chan struct{}, maxInFlight), bound: inflight.New(prefetchShare)}
}

// Store reads st's blobs through the session.
func (s *Session) Store(st store.Store) store.Store { return &sessionStore{Store: st, s: s} }

// Busy is how many reads hold a slot and how many wait for one.
func (s *Session) Busy() (active, queued int64) { return s.active.Load(), s.queued.Load() }

// Waited reports whether a read of id had to wait for a slot.
func (s *Session) Waited(id uuid.UUID) bool {
	_, ok := s.waited.Load(id)
	return ok
}

type sessionStore struct {
	store.Store
	s *Session
}

func (st *sessionStore) Get(ctx context.Context, id uuid.UUID, buf []byte) (store.Blob, error) {
	s := st.s
	select {
	case s.slots <- struct{}{}:
	default:
		s.waited.Store(id, true)
		s.queued.Add(1)
		select {
		case s.slots <- struct{}{}:
			s.queued.Add(-1)
		case <-ctx.Done():
			s.queued.Add(-1)
			return store.Blob{}, ctx.Err()
		}
	}
	s.active.Add(1)
	defer func() { s.active.Add(-1); <-s.slots }()
	t := time.NewTimer(s.Latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return store.Blob{}, ctx.Err()
	}
	return st.Store.Get(ctx, id, buf)
}

// PrefetchBound is the session's bound on prefetches, as store/cassandra's Store has.
func (st *sessionStore) PrefetchBound() *inflight.Bound { return st.s.bound }

// CheckDemandRead starts reading the first epoch of the mount at a (a dataset of samples
// made by MakeSample), waits until its prefetches fill the session's prefetch share, then
// reads sample 7 of dataset bName by id at the mount at b (a demand read: a by-uuid
// lookup prefetches nothing) with read, and fails the test if that read had to wait for a
// slot: behind prefetches of a's.
func CheckDemandRead(t testing.TB, s *Session, a, b, bName string, read func(string) ([]byte, error)) {
	t.Helper()
	first, err := read(filepath.Join(a, "all", "epoch-0", "file_list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(string(first), " ")
	go read(filepath.Join(a, "all", "epoch-0", name)) // a stream starts: its first window of prefetches
	for deadline := time.Now().Add(10 * time.Second); s.active.Load() < int64(s.bound.Max()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first mount's prefetches did not start within 10 s")
		}
	}
	time.Sleep(20 * time.Millisecond) // any prefetch still on its way reaches the session
	sample, data := MakeSample(bName, 7, 1, 107)
	active, queued := s.Busy()
	got, err := read(filepath.Join(b, "by-uuid", sample.ID.String()+".jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%s's sample read %d bytes, want its %d", bName, len(got), len(data))
	}
	if s.Waited(sample.ID) {
		t.Errorf("a demand read of %s waited behind the other's prefetches (%d in flight, %d waiting, of %d slots)", bName, active, queued, cap(s.slots))
	}
}
