// Package prefetch gets blobs to readers before they ask: a byte-bounded cache that fetches
// each sample once however many readers want it, and a prefetcher that walks each epoch's
// known order ahead of the readers. It owns the window, the requests in flight and the
// cache with its eviction policy. It must not know FUSE or CQL: it is driven by a Fetcher
// over canonical sample indices (StoreFetch makes one from a store.BlobReader; the disk tier and
// the mount's metrics wrap it) and by streams of epoch orders (Stream, implemented by
// package view).
//
// # Cache
//
// Cache.Get returns a sample's bytes from memory or fetches them. Concurrent Gets of a
// sample share one fetch (the kernel splits a file into several READs, and several readers
// may open the same file), and a Get of a sample being prefetched joins that fetch. The
// fetch runs detached from the first caller's context, so a reader that gives up does not
// fail the others; it is bounded by the fetch function's own deadline.
//
// Memory is bounded in bytes. Blobs are either fresh (prefetched, not yet read) or used
// (read at least once). When a new blob would exceed the bound, used blobs go first: a
// sample read in this epoch is not needed again until the next, while a fresh one is about
// to be. A used blob the prefetcher wants again (a later epoch reaching it) becomes fresh
// again instead of being fetched. Among used blobs, with a prefetcher that knows its
// streams' orders (Options.Samples), the one read farthest ahead goes first (see Eviction
// by the known future); otherwise the least recently used. A prefetched blob that finds
// only fresh blobs to evict is dropped instead (the ones already there are needed sooner);
// a demand-read blob evicts the oldest fresh ones. Prefetching reserves room for what it
// has in flight (the caller knows each blob's size from the index), so arrivals find their
// room. A blob larger than the bound is served but not kept. Samples readers get elsewhere
// (CacheOptions.Local: the disk tier's files, passed through or spliced) are not
// prefetched, and Drop forgets a blob once its reader reads its file.
//
// With CacheOptions.Push, each prefetched blob is also handed on as it arrives (package fs
// writes it into the kernel's page cache, so its reader sends no READ), and so is a held
// blob wanted again by a later epoch (its pages may have been reclaimed since). A pushed
// blob counts as read once its reader looks it up (Looked), since no Get may come; it stays
// cached, among the used blobs evicted first, for a READ that still comes. The bound is
// unchanged: MaxBytes is what the daemon holds; pushed pages are the kernel's page cache.
//
// A block's blobs are kept in the one buffer they came in, not copied (share.go): the
// cache counts the buffer while any of them is held, and copies the rest out when it
// evicts one, so the bound stays what the daemon holds.
//
// Returned slices are shared and must not be modified.
//
// # Blocks
//
// A request costs the database and the client about as much again as a 110 KB blob does:
// read with gocql alone, 16 ids per request with 8 requests in flight cost the client
// 156–179 µs and the node 288–307 µs of CPU per blob, one id per request with 16 in
// flight 228–240 and 345–463 (../shared/design/blocks-and-records.md; too few requests
// in flight starve the node: 32 ids × 2 read slower than one id × 16). So where the
// Fetcher is a BlockFetcher (StoreFetch over a store.BlockReader; the disk tier and the
// mount's metrics pass blocks through) and CacheOptions.Block.Samples is above 1, the
// prefetches the Prefetcher issues are queued and sent as blocks of up to Samples samples
// (16 by default in cassfs mount, --block-samples: through a mount, blocks of 8, 16 and 32
// cost the daemon 190–250, 210–213 and 197–207 µs per file at alike rates, and the driver
// alone read 16 × 8 fastest; bench/history/journal.md, "a cold epoch read from the
// database in blocks") and Bytes (4 MiB by the sizes they
// reserve: a block's answer is one response frame of the native protocol, whose size
// Cassandra bounds by native_transport_max_frame_size, 16 MiB by default).
//
// Everything else counts samples as before: a queued prefetch is in flight for
// MaxInFlight, the window and the shared bound, so the controller sizes its limit in blobs,
// and a limit of 64 is four blocks. A full block goes out at once; a part-filled one only
// while no block is in flight or being answered (Nagle's rule, Cache.flush): the arrivals
// of a block let the prefetcher issue as many again, and the prefetches they issue make
// the next block instead of going out one by one. So blocks are full while the database
// is busy (15.5 samples a block in a cold epoch at a 0.1 ms link) and nothing waits when
// it is idle. A block's answers are handed out together once all have come, but for a
// block split between nodes (its parts arrive apart): cached and pushed as they come.
//
// A block is never worse than single reads for a reader: a Get of a sample queued for a
// block takes it out and fetches it alone at once; a Get of a sample in a block sent waits
// for it up to BlockOptions.HedgeAfter (cassfs mount's --speculative-after, 1 s), then
// fetches it alone as well and takes the first answer. A sample the block's answer lacks,
// or whose blob does not verify, fails alone, with the error kinds of a single fetch; a
// block that fails as a whole is read again sample by sample (store.BlockReader).
//
// # Eviction by the known future
//
// Epoch orders are a pure function of the seed, so the future reads of a stream are known.
// The Cache evicts its used blobs by Belady's MIN over that future (evict.Clairvoyant):
// the held blob needed farthest ahead goes first. The Prefetcher publishes the future
// (future.go: each stream's current and next epoch order, inverted, with the readers'
// position, through atomics, since the cache asks under its own lock; the next epoch's
// order is computed as readers enter an epoch, so it is known all through it), which in a
// stream of permutations is every next use there is. The policy's clock is the cache's
// count of reads; a blob's next read is that count plus the reads before the nearest
// stream reaches it. With half a split cached, later epochs then fetch about half the
// split, where LRU fetched some 85% of it (TestFutureEvictionKeepsWhatIsReadNext). The
// disk tier evicts by the same future (Prefetcher.Reuse; see package disktier).
//
// # Prefetcher
//
// Each split a reader walks is a stream through its epochs, whose orders are known in
// advance (Stream). The filesystem reports every access (a lookup of a sample of epoch N of
// a stream); the readers' progress is the number of samples accessed in the epoch, and the
// prefetcher keeps the samples from that position of the epoch's order up to a window
// ahead in flight or cached, continuing into epoch N+1 before N ends — but only
// Options.NextEpochAhead samples into it until readers enter it: readers that stop at the
// end of an epoch (a benchmark, the last epoch, a validation pass) leave almost nothing
// fetched in vain, and readers that go on find the next epoch started. Blobs enter the cache
// as they arrive, in any order, so one slow fetch never holds up the others (the
// out-of-order loading of Versaci and Busonera, "Hiding Latencies in Network-Based Image
// Loading for Deep Learning", 2025).
//
// Streams are told apart by name (a split, a shard directory of it, a resumed view) and come
// and go: one not accessed for Options.IdleAfter is dropped with its orders and its future,
// so a long job that moves from shard to shard holds the state, and shows the metric
// series, of the streams it reads now; accessed again, a stream starts anew.
//
// Progress is counted, not taken from the positions looked up: readers in file_list order
// advance it exactly as their positions do, and readers that shuffle on their own
// (torchvision's DataLoader) advance it as fast as they consume. Under arrival binding
// their names are then bound to the samples fetched ahead; under strict order they profit
// only where their random picks fall into the window.
//
// Prefetches in flight are capped at MaxInFlight per prefetcher, and, with
// CacheOptions.Shared, those of every cache reading through one database session together
// below the session's own bound (package inflight): several mounts of a process (volumes
// of cassfs serve, --dataset a,b) cannot fill the session between them, and demand reads of
// samples not yet fetched always find room and jump the queue; and issuing pauses
// while prefetched-but-unread blobs fill the cache up to KeepFree bytes short of its bound:
// the window shrinks to what memory holds, and resumes as readers consume.
//
// # Window controller
//
// Nobody tunes a window per link, so each stream's window sizes itself from two
// measurements (control.go):
//
//   - the link's latency d: the smallest latency of the prefetches since the last probe.
//     The smallest, not the mean: the mean includes the queueing the prefetcher itself
//     causes at the database, and a window sized from it would grow the queue that
//     inflates it. But a minimum over a sliding horizon has the same fault once the
//     database is the bottleneck: every fetch then waits behind the others in flight, no
//     fetch is faster than the queue, and when the horizon has passed the minimum is the
//     queueing delay — the limit grows with the queue and the queue with the limit, up to
//     MaxInFlight (bench/history/journal.md, "the window controller cannot feed on its own
//     queue"). So the minimum is kept however old, and
//     when no fetch has come back as fast for 10 s (1 s the first time: a stream starts
//     with a burst of InitialWindow prefetches, whose first ones may already have queued),
//     a probe drains the queue, as BBR's ProbeRTT does: every stream's limit falls to 4 until the prefetches in flight are
//     down to 4, and the smallest latency of the next 4 prefetches issued after that is the
//     new d (larger or smaller: a route that got longer is followed). What d still holds
//     of a queue is the readers' own requests (a reader that outran the window waits on a
//     fetch of its own), which do not grow with the limit;
//   - the rate r the stream is served at: the lower of the readers' rate (samples consumed
//     per second) and the rate prefetches come back at. The second bounds the first where
//     the readers, reading what the window already holds, consume faster than the database
//     delivers (readers' bursts are then far above what the database serves, and would size
//     the limit for a rate nobody can serve). Each is measured over ticks of at
//     least a round trip (20 ms at least; arrivals come in bursts, and a shorter tick
//     measures a burst), as the highest tick of the last second. A higher rate counts at
//     once, one slow tick (readers held up by a straggler) does not shrink the window, and a
//     lower rate that lasts — a database that slowed down, another client taking its share
//     — is the rate within a second, and the limit comes down with it. Once readers stop,
//     the last rate fades with a half-life of 1 s.
//
// Readers consuming r samples/s from fetches that take d need r·d fetches in flight
// (Little's law). A stream may have InitialWindow + 2·r·d prefetches in flight (its limit,
// within MaxInFlight), and its window reaches four times its limit ahead of the readers
// (within MaxWindow). The factor 2 is headroom, and it is what lets the limit find the
// rate the readers can reach: while they wait on the prefetcher, r is the rate the limit
// allows (about limit/d, and so is the prefetches' rate), so each round trip the limit and
// the rate it allows roughly double, until the readers' own speed or the database's throughput bounds r. From 64 at
// 150 ms, readers that could take 1,500 samples/s are served at that rate after about four
// round trips. The window's slack beyond the limit keeps the database busy while readers
// in strict order wait for one late sample: issuing goes on instead of draining; a probe
// leaves the window as it is and only slows issuing, so the readers read on from what the
// window holds while the queue drains.
//
// It cannot feed on itself: d does not follow the limit (the probe measures it with the
// prefetches drained), r only follows the limit while the limit is what holds the readers
// back, and there it grows monotonically; once the readers or the database bound r, a
// larger limit changes neither measurement. Growth overshoots the need by at most the gain
// (2×), and the cache bounds it in bytes: a window beyond what KeepFree leaves is simply
// not issued. TestControllerOnASaturatedDatabase and TestControllerThroughASlowdown hold it
// to that against a simulated database with a queue.
//
// When the readers stop, nothing is issued beyond the window they left (no timer issues
// anything), the rate fades, and readers that come back start from a window sized to their
// new rate, not to the one they left with: no burst onto the link after a pause.
//
// A completed prefetch wakes only the stream that issued it, and the streams the cache
// turned away for lack of room; an epoch's order is pulled from its Stream outside every
// lock of this package.
//
// # Errors
//
// A failed fetch is returned to every waiter as a *FetchError naming the sample. When a
// reader waited for it, the failure is remembered for CacheOptions.FailureMemory (default
// 1 s): the kernel retries a failed readahead at once with a read of its own, which then
// fails at once instead of waiting for a second deadline, so a reader waits at most one
// deadline. After that the next Get tries again. A failed prefetch nobody waited for is
// forgotten at once, so a node lost for a moment costs readers nothing.
//
// # Disk tier
//
// The disk tier (package disktier) keeps fetched blobs as files in a local directory, for
// later epochs and later mounts. It is a Fetcher under the Cache: a fetch is served from
// its file when it holds one that verifies, else fetched and written there. Files it holds
// are better read from there (by the kernel itself through FUSE passthrough, or spliced by
// package fs): the Cache then leaves them alone (CacheOptions.Local) and drops their
// blobs once read there (Cache.Drop).
//
// # Lock order
//
// A stream's lock (stream.mu) may be held while taking Cache.mu (issuing a prefetch);
// never the other way round: the cache calls the prefetcher back (arrivals) with no lock
// held. Prefetcher.mu guards the set of streams only and is never held while taking
// another lock. The controller's locks come between the two: a stream's lock may be held
// while taking linkDelay.mu or Prefetcher.dmu (sizing the stream), and linkDelay.mu while
// taking Cache.mu (a probe counting the prefetches in flight); dmu is a leaf, and so is
// the shared bound's lock (inflight.Bound, taken under Cache.mu; it calls the caches it
// turned away back with no lock held).
// Stream.Order is called with no lock of this package held. Under Cache.mu only lock-free
// calls leave the package (the Local and BlockOptions.Alone predicates:
// disktier.Tier.Holds). Prefetcher.Next, asked under Cache.mu when the cache evicts, takes
// no lock either: it reads what the streams publish through atomics. Blocks keep this
// order: a stream's lock is held while Cache.flush takes Cache.mu to send a block
// (pumpLocked), as when it issues a prefetch, and a block's answers are handed out
// (Cache.finish, then the arrival callback) with no lock held.
package prefetch
