package prefetch_test

import (
	"context"
	"fmt"

	"github.com/cassfs/cassfs/prefetch"
)

// fetchFunc is a Fetcher that is a function.
type fetchFunc func(ctx context.Context, i uint32) ([]byte, error)

func (f fetchFunc) Fetch(ctx context.Context, i uint32) ([]byte, error) { return f(ctx, i) }

// A Cache over a function that stands for the database: a sample is fetched once, then
// served from memory, until it is dropped.
func ExampleCache() {
	fetches := 0
	c := prefetch.NewCache(fetchFunc(func(ctx context.Context, i uint32) ([]byte, error) {
		fetches++
		return fmt.Appendf(nil, "blob %d", i), nil
	}), prefetch.CacheOptions{MaxBytes: 1 << 20, Samples: 10})
	defer c.Close()

	ctx := context.Background()
	for _, i := range []uint32{3, 3, 5} {
		b, err := c.Get(ctx, i)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s (cached: %v)\n", b, c.Has(i))
	}
	c.Drop(3)
	fmt.Println("3 cached after Drop:", c.Has(3))
	s := c.Stats()
	fmt.Printf("fetches %d, hits %d, misses %d, bytes %d\n", fetches, s.Hits, s.Misses, s.Bytes)
	// Output:
	// blob 3 (cached: true)
	// blob 3 (cached: true)
	// blob 5 (cached: true)
	// 3 cached after Drop: false
	// fetches 2, hits 1, misses 2, bytes 6
}
