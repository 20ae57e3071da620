// Package prefetch gets blobs to readers before they ask: a byte-bounded cache that fetches
// each sample once however many readers want it, and a prefetcher that walks each epoch's
// known order ahead of the readers. It owns the window, the requests in flight and the
// cache with its eviction policy. It must not know FUSE or CQL: it is driven by a fetch
// function over canonical sample indices (StoreFetch makes one from a store.Store) and by
// streams of epoch orders (Stream, implemented by package view).
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
// (read at least once). When a new blob would exceed the bound, used blobs go first, least
// recently used first: a sample read in this epoch is not needed again until the next, while
// a fresh one is about to be. A prefetched blob that finds only fresh blobs to evict is
// dropped instead (the ones already there are needed sooner); a demand-read blob evicts the
// oldest fresh ones. Prefetching reserves room for what it has in flight (the caller knows
// each blob's size from the index), so arrivals find their room. A blob larger than the
// bound is served but not kept.
//
// Returned slices are shared and must not be modified.
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
// Progress is counted, not taken from the positions looked up: readers in file_list order
// advance it exactly as their positions do, and readers that shuffle on their own
// (torchvision's DataLoader) advance it as fast as they consume. Under arrival binding
// their names are then bound to the samples fetched ahead; under strict order they profit
// only where their random picks fall into the window.
//
// The window starts small and grows by one for every GrowEvery samples consumed (the
// paper's "one extra batch for every four consumed": at most 25% above the steady rate), so
// a new reader does not burst hundreds of requests onto the link at once. It stops growing
// at MaxWindow, and issuing pauses while prefetched-but-unread blobs fill the cache up to
// KeepFree bytes short of its bound: the window shrinks to what memory holds, and resumes as
// readers consume. Prefetches in flight are capped at MaxInFlight, below the store's own
// bound, so demand reads of samples not yet fetched always find room and jump the queue.
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
// # Lock order
//
// A stream's lock (stream.mu) may be held while taking Cache.mu (issuing a prefetch);
// never the other way round: the cache calls the prefetcher back (arrivals) with no lock
// held. Prefetcher.mu guards the set of streams only and is never held while taking
// another lock. Stream.Order is called with no lock of this package held.
package prefetch
