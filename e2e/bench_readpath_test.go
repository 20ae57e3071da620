//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkBlobReadPaths: what the driver and new blob memory cost on the read path. The
// same blobs (1,000 generated images of ~110 KB, read round and round after a warm-up
// pass) are read with 32 and 128 in flight into a ring of 600 blobs kept as a cache keeps
// them (readBlobs), three ways: the store's Get without a buffer, as the prefetcher reads
// (gocql v1.7's frame kept as the blob; the evicted blob is garbage); the store's Get into
// the evicted blob's memory (gocql copies out of its frame); and the least a client can do
// for that one query, into the evicted blob's memory: a prepared EXECUTE over one
// multiplexed CQL v4 connection, each response's blob read from the socket straight into
// the buffer, no per-request allocation, timer or goroutine (rawReader below: no TLS,
// login, routing, reconnection or deadline, so it shows a floor, not a read path to ship).
// Reported: this process's CPU per blob (getrusage), beside images/s.
func BenchmarkBlobReadPaths(b *testing.B) {
	st, ids, _ := blobDataset(b, "readpath")
	raw, err := dialRaw(hosts[0], st.Dataset())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.close()
	paths := []struct {
		name string
		get  func(id uuid.UUID, buf []byte) ([]byte, error)
	}{
		// As the prefetcher reads: no buffer, the driver's frame kept as the blob.
		{"gocql-frames", func(id uuid.UUID, _ []byte) ([]byte, error) {
			blob, err := st.Get(context.Background(), id, nil)
			return blob.Data, err
		}},
		{"gocql-recycled", func(id uuid.UUID, buf []byte) ([]byte, error) {
			blob, err := st.Get(context.Background(), id, buf)
			return blob.Data, err
		}},
		{"raw-recycled", raw.get},
	}
	for _, p := range paths { // warm Cassandra's caches for both alike
		readBlobs(b, ids, len(ids), 32, p.get)
	}
	for _, inflight := range []int{32, 128} {
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/inflight=%d", p.name, inflight), func(b *testing.B) {
				before := cpuSelf()
				start := time.Now()
				readBlobs(b, ids, b.N, inflight, p.get)
				took := time.Since(start)
				b.ReportMetric(float64((cpuSelf()-before).Microseconds())/float64(b.N), "cpu-µs/blob")
				b.ReportMetric(float64(b.N)/took.Seconds(), "images/s")
			})
		}
	}
}

// readBlobs reads n blobs of ids, round and round, with inflight goroutines, into a ring
// of ringSlots blobs kept as a cache keeps them: the blob read for position i replaces the
// one in slot i % ringSlots, whose memory get is given to read into (recycled) or which
// becomes garbage (get ignores it).
func readBlobs(b *testing.B, ids []uuid.UUID, n, inflight int, get func(uuid.UUID, []byte) ([]byte, error)) {
	const ringSlots = 600 // ~66 MB of 110 KB blobs
	ring := make([]atomic.Pointer[[]byte], ringSlots)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				var buf []byte
				if old := ring[i%ringSlots].Swap(nil); old != nil {
					buf = (*old)[:0]
				}
				data, err := get(ids[i%int64(len(ids))], buf)
				if err != nil {
					b.Error(err)
					return
				}
				ring[i%ringSlots].Store(&data)
			}
		})
	}
	wg.Wait()
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawReader is one CQL native protocol v4 connection that runs one prepared statement,
// SELECT label, data FROM <ds>.blobs WHERE id = ?, for many callers at once.
type rawReader struct {
	conn    net.Conn
	prepID  []byte
	wmu     sync.Mutex // one frame written at a time
	free    chan int16 // stream ids not in use
	pending [1024]atomic.Pointer[rawCall]
	err     atomic.Pointer[error]
}

type rawCall struct {
	buf  []byte // the caller's, filled if it has room
	data []byte
	err  error
	done chan struct{}
}

const (
	opError    = 0x00
	opStartup  = 0x01
	opReady    = 0x02
	opResult   = 0x08
	opPrepare  = 0x09
	opExecute  = 0x0A
	resultRows = 0x0002
	localOne   = 0x000A
)

func dialRaw(addr, ds string) (*rawReader, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &rawReader{conn: conn, free: make(chan int16, 1024)}
	br := bufio.NewReaderSize(conn, 64<<10)
	// STARTUP, then PREPARE, in lockstep before the reader loop starts.
	startup := binary.BigEndian.AppendUint16(nil, 1)
	startup = appendString(appendString(startup, "CQL_VERSION"), "3.0.0")
	if op, _, err := r.roundTrip(br, opStartup, startup); err != nil || op != opReady {
		conn.Close()
		return nil, fmt.Errorf("startup: opcode %#x, %v", op, err)
	}
	q := fmt.Sprintf("SELECT label, data FROM %s.blobs WHERE id = ?", ds)
	body := binary.BigEndian.AppendUint32(nil, uint32(len(q)))
	op, res, err := r.roundTrip(br, opPrepare, append(body, q...))
	if err != nil || op != opResult || len(res) < 6 || binary.BigEndian.Uint32(res) != 0x0004 {
		conn.Close()
		return nil, fmt.Errorf("prepare: opcode %#x, %v", op, err)
	}
	n := int(binary.BigEndian.Uint16(res[4:]))
	r.prepID = append([]byte(nil), res[6:6+n]...)
	for s := range int16(1024) {
		r.free <- s
	}
	go r.readLoop(br)
	return r, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}

func frame(op byte, stream int16, body []byte) []byte {
	f := []byte{0x04, 0, byte(uint16(stream) >> 8), byte(stream), op}
	f = binary.BigEndian.AppendUint32(f, uint32(len(body)))
	return append(f, body...)
}

// roundTrip sends one frame on stream 0 and reads its answer (before the read loop runs).
func (r *rawReader) roundTrip(br *bufio.Reader, op byte, body []byte) (byte, []byte, error) {
	if _, err := r.conn.Write(frame(op, 0, body)); err != nil {
		return 0, nil, err
	}
	var h [9]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	res := make([]byte, binary.BigEndian.Uint32(h[5:]))
	if _, err := io.ReadFull(br, res); err != nil {
		return 0, nil, err
	}
	if h[4] == opError {
		return h[4], res, fmt.Errorf("server error: %q", res)
	}
	return h[4], res, nil
}

func (r *rawReader) get(id uuid.UUID, buf []byte) ([]byte, error) {
	if err := r.err.Load(); err != nil {
		return nil, *err
	}
	stream := <-r.free
	defer func() { r.free <- stream }()
	call := &rawCall{buf: buf, done: make(chan struct{})}
	r.pending[stream].Store(call)
	var body [128]byte
	b := binary.BigEndian.AppendUint16(body[:0], uint16(len(r.prepID)))
	b = append(b, r.prepID...)
	b = binary.BigEndian.AppendUint16(b, localOne)
	b = append(b, 0x01|0x02) // values, skip metadata
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, 16)
	b = append(b, id[:]...)
	r.wmu.Lock()
	_, err := r.conn.Write(frame(opExecute, stream, b))
	r.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	<-call.done
	return call.data, call.err
}

// readLoop reads responses: a row's blob straight into its caller's buffer.
func (r *rawReader) readLoop(br *bufio.Reader) {
	fail := func(err error) {
		r.err.Store(&err)
		for k := range r.pending {
			if c := r.pending[k].Swap(nil); c != nil {
				c.err = err
				close(c.done)
			}
		}
	}
	var h [9]byte
	var pre [28]byte
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			fail(err)
			return
		}
		n := int(binary.BigEndian.Uint32(h[5:]))
		call := r.pending[int16(binary.BigEndian.Uint16(h[2:]))&1023].Swap(nil)
		if call == nil {
			fail(errors.New("a response for no request"))
			return
		}
		// kind, flags, columns, rows, the label ([bytes] of an int), the blob's length.
		if h[4] != opResult || n < len(pre) {
			msg := make([]byte, n)
			_, err := io.ReadFull(br, msg)
			call.err = errors.Join(fmt.Errorf("opcode %#x: %q", h[4], msg), err)
			close(call.done)
			continue
		}
		if _, err := io.ReadFull(br, pre[:]); err != nil {
			fail(err)
			return
		}
		size := int(int32(binary.BigEndian.Uint32(pre[24:])))
		if binary.BigEndian.Uint32(pre[0:]) != resultRows || binary.BigEndian.Uint32(pre[12:]) != 1 || size < 0 || size != n-len(pre) {
			call.err = errors.New("not one row with a blob")
			_, err := br.Discard(n - len(pre))
			close(call.done)
			if err != nil {
				fail(err)
				return
			}
			continue
		}
		data := call.buf[:0]
		if cap(data) < size {
			data = make([]byte, size)
		}
		data = data[:size]
		if _, err := io.ReadFull(br, data); err != nil {
			fail(err)
			return
		}
		call.data = data
		close(call.done)
	}
}

func (r *rawReader) close() { r.conn.Close() }
