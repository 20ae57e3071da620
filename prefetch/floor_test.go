package prefetch

import (
	"hash/crc32"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkBlobFloor measures, on this machine, the steps no read path can skip for a
// ~110 KB sample served from memory, so that the daemon's CPU per sample can be set
// against a floor measured the same way (bench/history/journal.md):
//
//   - copy-cold: one copy of a blob that is not in the CPU's caches, as the kernel makes
//     from a socket into the daemon's memory and from there into a FUSE reply (two per
//     sample served from memory);
//   - fresh-pages: a blob's size of new anonymous memory, faulted in (and zeroed) by the
//     kernel: what every blob costs while the cache grows (a cold epoch with a cache
//     larger than what has been read so far);
//   - crc32c: verifying the blob (the SSE4.2 path on amd64).
func BenchmarkBlobFloor(b *testing.B) {
	const size = 110_000
	b.Run("copy-cold", func(b *testing.B) {
		const n = 2048 // 225 MB: far beyond any CPU cache
		src := make([][]byte, n)
		for i := range src {
			src[i] = make([]byte, size)
			for j := 0; j < size; j += 4096 {
				src[i][j] = byte(i)
			}
		}
		dst := make([]byte, size)
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			copy(dst, src[i%n])
		}
	})
	b.Run("fresh-pages", func(b *testing.B) {
		// One mapping for all the blobs, unmapped after the timer stops: a growing
		// cache faults memory in and keeps it.
		m, err := unix.Mmap(-1, 0, b.N*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ResetTimer()
		for i := range b.N {
			for j := i * size; j < (i+1)*size; j += 4096 {
				m[j] = 1
			}
		}
		b.StopTimer()
		unix.Munmap(m)
	})
	b.Run("crc32c", func(b *testing.B) {
		data := make([]byte, size)
		table := crc32.MakeTable(crc32.Castagnoli)
		b.SetBytes(size)
		for b.Loop() {
			crc32.Checksum(data, table)
		}
	})
}
