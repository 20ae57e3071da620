package prefetch

import (
	"github.com/cassfs/cassfs/evict"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// usedSet holds the blobs readers have read, which the cache evicts first. Without a known
// future it is LRU; with one (Cache.useFuture) it is Belady's MIN over that future
// (evict.Clairvoyant): the blob evicted is the one whose next read is farthest ahead, so that
// from one epoch to the next the cache keeps what the next epoch reads first instead of
// what the last one read last. All methods are called under the cache's lock.
type usedSet interface {
	get(i uint32) ([]byte, bool) // a read: LRU moves it to the front
	peek(i uint32) ([]byte, bool)
	add(i uint32, data []byte)
	remove(i uint32)
	replace(i uint32, data []byte)  // the same blob in other memory; its place is kept
	victim() (uint32, []byte, bool) // removes and returns the blob to evict first
	len() int
	keys() []uint32
}

// blobLRU is an LRU of blobs whose entries can be given other memory in place (Replace),
// which simplelru's Add cannot do without moving the entry to the front.
type blobLRU struct {
	l *simplelru.LRU[uint32, *[]byte]
}

func newBlobLRU() *blobLRU {
	// Entries are bounded by bytes, not count; the count bound only has to be unreachable.
	l, _ := simplelru.NewLRU[uint32, *[]byte](1<<31-1, nil)
	return &blobLRU{l}
}

func deref(p *[]byte, ok bool) ([]byte, bool) {
	if !ok {
		return nil, false
	}
	return *p, true
}

func (b *blobLRU) Get(i uint32) ([]byte, bool)  { return deref(b.l.Get(i)) }
func (b *blobLRU) Peek(i uint32) ([]byte, bool) { return deref(b.l.Peek(i)) }
func (b *blobLRU) Contains(i uint32) bool       { return b.l.Contains(i) }
func (b *blobLRU) Add(i uint32, data []byte)    { b.l.Add(i, &data) }
func (b *blobLRU) Remove(i uint32)              { b.l.Remove(i) }
func (b *blobLRU) Len() int                     { return b.l.Len() }
func (b *blobLRU) Keys() []uint32               { return b.l.Keys() }
func (b *blobLRU) RemoveOldest() (uint32, []byte, bool) {
	i, p, ok := b.l.RemoveOldest()
	d, _ := deref(p, ok)
	return i, d, ok
}

// Replace gives entry i data, keeping its place; false if there is none.
func (b *blobLRU) Replace(i uint32, data []byte) bool {
	p, ok := b.l.Peek(i)
	if ok {
		*p = data
	}
	return ok
}

type lruUsed struct {
	l *blobLRU
}

func newLRUUsed() *lruUsed { return &lruUsed{newBlobLRU()} }

func (u *lruUsed) get(i uint32) ([]byte, bool)    { return u.l.Get(i) }
func (u *lruUsed) peek(i uint32) ([]byte, bool)   { return u.l.Peek(i) }
func (u *lruUsed) add(i uint32, data []byte)      { u.l.Add(i, data) }
func (u *lruUsed) remove(i uint32)                { u.l.Remove(i) }
func (u *lruUsed) replace(i uint32, data []byte)  { u.l.Replace(i, data) }
func (u *lruUsed) victim() (uint32, []byte, bool) { return u.l.RemoveOldest() }
func (u *lruUsed) len() int                       { return u.l.Len() }
func (u *lruUsed) keys() []uint32                 { return u.l.Keys() }

// minUsed is the used set under a known future. Its clock counts the cache's reads.
type minUsed struct {
	data   map[uint32][]byte
	policy *evict.Clairvoyant
	now    *uint64 // the cache's read counter
}

func newMinUsed(f evict.Future, now *uint64) *minUsed {
	return &minUsed{data: map[uint32][]byte{}, policy: evict.NewClairvoyant(f), now: now}
}

func (u *minUsed) get(i uint32) ([]byte, bool) {
	d, ok := u.data[i]
	if ok {
		u.policy.Used(i, *u.now)
	}
	return d, ok
}
func (u *minUsed) peek(i uint32) ([]byte, bool) { d, ok := u.data[i]; return d, ok }
func (u *minUsed) add(i uint32, data []byte) {
	u.data[i] = data
	u.policy.Add(i, *u.now)
}
func (u *minUsed) replace(i uint32, data []byte) {
	if _, ok := u.data[i]; ok {
		u.data[i] = data
	}
}
func (u *minUsed) remove(i uint32) {
	delete(u.data, i)
	u.policy.Remove(i)
}
func (u *minUsed) victim() (uint32, []byte, bool) {
	i, _, ok := u.policy.Victim(*u.now)
	if !ok {
		return 0, nil, false
	}
	d := u.data[i]
	u.remove(i)
	return i, d, true
}
func (u *minUsed) len() int { return len(u.data) }
func (u *minUsed) keys() []uint32 {
	out := make([]uint32, 0, len(u.data))
	for i := range u.data {
		out = append(out, i)
	}
	return out
}
