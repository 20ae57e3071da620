package mount

import (
	"errors"
	"fmt"
	"time"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/view"
)

// Options say what a mount shows and how it reads. Defaults returns them with every
// default; each field names the `cassfs mount` flag that sets it, which is also what Check's
// errors name.
type Options struct {
	Seed         uint64 // --seed: seed of the epoch permutations
	EpochsListed int    // --epochs-listed: epoch directories a split lists (any epoch-N resolves)
	EpochViews   int    // --epoch-views: epoch orders kept in memory
	// CacheBytes (--cache-size) bounds the blobs the daemon holds in memory.
	CacheBytes uint64
	// CacheDir (--cache-dir), if set, keeps fetched blobs as files there, up to
	// CacheDirBytes (--cache-dir-size).
	CacheDir      string
	CacheDirBytes int64
	// Prefetch (--prefetch) is the largest read-ahead window in samples (0: no prefetching);
	// PrefetchInFlight (--prefetch-in-flight) the most prefetches in flight.
	Prefetch         int
	PrefetchInFlight int
	// BlockSamples (--block-samples) is the most samples the prefetcher asks the database
	// for in one request (package prefetch, "Blocks"; 0 or 1: one request per sample).
	BlockSamples int
	// RecordShardBytes (--record-shard-size) is the size each shard of an epoch's record
	// view (epoch-N.wds/) aims at.
	RecordShardBytes int64
	Order            view.Mode // --order: arrival or strict binding of names
	MaxBackground    int       // --max-background: the kernel's limit on concurrent reads
	AllowOther       bool      // --allow-other
	Pprof            bool      // --pprof: serve Go's profiler beside the metrics
	DebugFUSE        bool      // --debug-fuse: log every FUSE request (to the mount's logger)
	Splits           string    // --splits: stored splits shown beside "all" (* for all)
	// ScanIndex (--scan-index) builds the index by scanning the samples even if the
	// dataset has a current index snapshot (index.Read).
	ScanIndex bool
	// Shard (--shard, --shard-pad) is what a split's epoch directories show: rank Rank's
	// part of every epoch among Count ranks (the zero Shard: all of it). Its Pad also holds
	// for the shard directories (<split>/shard-R-of-W/) every mount shows.
	Shard splits.Shard
	// Push (--push) writes prefetched blobs into the kernel's page cache ahead of readers.
	Push bool
	// LookAhead (--look-ahead): names of each epoch a helper process looks up ahead of the
	// readers (with Push; 0: off). LookaheadHelper is the command that runs the helper,
	// given the mountpoint as its last argument (cassfs: itself, "lookahead-helper");
	// without one, no names are looked up ahead.
	LookAhead       int
	LookaheadHelper []string
	// StreamNames (--stream-names, on by default): with LookAhead, the class directories
	// of a cold epoch are read ahead of the readers a chunk at a time where fetches come
	// back fast (streamBelow), their names bound then, in fetch order.
	StreamNames bool
	// HedgeAfter (--speculative-after): on a cluster of more than one node, a blob read not
	// answered after this long is sent once more (store/hedge); 0: never.
	HedgeAfter time.Duration
	// RecordsAt (--records-at), if set, is where the record view is also mounted on a
	// connection of its own, whose tars of an epoch read warm are passed through to local
	// files (fs.MountRecords): in --cache-dir if set, else in the temporary directory.
	RecordsAt string
}

// Defaults returns the options of a mount no flag changed.
func Defaults() Options {
	return Options{
		EpochsListed:     10,
		EpochViews:       4,
		CacheBytes:       1 << 30,
		Prefetch:         8192,
		PrefetchInFlight: 1024,
		BlockSamples:     DefaultBlockSamples,
		RecordShardBytes: view.DefaultShardBytes,
		Order:            view.Arrival,
		MaxBackground:    128,
		Splits:           "*",
		Push:             true,
		LookAhead:        512,
		StreamNames:      true,
		HedgeAfter:       time.Second,
	}
}

// DefaultBlockSamples is the default of --block-samples: see package prefetch, "Blocks",
// for the measurements it was chosen by.
const DefaultBlockSamples = 16

// maxShardBytes bounds --record-shard-size: a larger shard gives a loader's workers too
// few to share, and no reader wants a tar that size.
const maxShardBytes = 64 << 30

// OptionError is an option out of its range: the caller's mistake, not the system's.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// Check reports the first option out of its range, as an *OptionError.
func (o *Options) Check() error {
	bad := func(err error) error { return &OptionError{err} }
	switch {
	case o.CacheBytes == 0:
		return bad(errors.New("--cache-size must be positive"))
	case o.EpochsListed < 0 || o.Prefetch < 0 || o.LookAhead < 0:
		return bad(errors.New("--epochs-listed, --prefetch and --look-ahead must be >= 0"))
	case o.BlockSamples < 0:
		return bad(fmt.Errorf("--block-samples must be 0 or more (0 or 1: one request per sample), got %d", o.BlockSamples))
	case o.RecordShardBytes < view.MinShardBytes || o.RecordShardBytes > maxShardBytes:
		return bad(fmt.Errorf("--record-shard-size must be between 1MiB and 64GiB (a tar of WebDataset samples; 100MB to 1GB is usual), got %d bytes", o.RecordShardBytes))
	case o.EpochViews <= 0 || o.MaxBackground <= 0 || o.PrefetchInFlight <= 0:
		return bad(errors.New("--epoch-views, --max-background and --prefetch-in-flight must be positive"))
	case o.CacheDir != "" && (o.CacheDirBytes <= 0 || o.CacheDirBytes > 1<<62):
		return bad(fmt.Errorf("--cache-dir needs --cache-dir-size, a positive size such as 200GiB"))
	case o.CacheDir == "" && o.CacheDirBytes != 0:
		return bad(errors.New("--cache-dir-size needs --cache-dir"))
	case o.HedgeAfter < 0:
		return bad(fmt.Errorf("--speculative-after must be 0 (off) or positive, got %v", o.HedgeAfter))
	}
	return nil
}

// pushes reports whether prefetched blobs are pushed into the page cache.
func (o *Options) pushes() bool { return o.Push && o.Prefetch > 0 }
