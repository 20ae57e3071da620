package mount

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestMetricsAddrDefaultsToLoopback(t *testing.T) {
	for in, want := range map[string]string{":9108": "127.0.0.1:9108", "0.0.0.0:9108": "0.0.0.0:9108", "10.0.0.5:1": "10.0.0.5:1"} {
		if got := metricsAddr(in); got != want {
			t.Errorf("metricsAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuantileFromBuckets(t *testing.T) {
	u := func(v float64) *float64 { return &v }
	c := func(v uint64) *uint64 { return &v }
	h := &dto.Histogram{SampleCount: c(100), Bucket: []*dto.Bucket{
		{UpperBound: u(0.01), CumulativeCount: c(50)},
		{UpperBound: u(0.02), CumulativeCount: c(90)},
		{UpperBound: u(0.04), CumulativeCount: c(100)},
	}}
	for q, want := range map[float64]float64{0.5: 0.01, 0.7: 0.015, 0.99: 0.038} {
		if got := quantile(h, q); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN(quantile(&dto.Histogram{}, 0.5)) {
		t.Error("quantile of an empty histogram is not NaN")
	}
}

// TestPprofOptIn: the profiler answers on the metrics endpoint only with --pprof.
func TestPprofOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		m := newMetrics()
		m.pprof = on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m.serveOn(ctx, ln, slog.New(slog.DiscardHandler))
		for path, want := range map[string]int{"/metrics": 200, "/debug/pprof/cmdline": map[bool]int{false: 404, true: 200}[on]} {
			resp, err := http.Get("http://" + ln.Addr().String() + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("pprof %v: GET %s = %d, want %d", on, path, resp.StatusCode, want)
			}
		}
		cancel()
	}
}

// TestStatsRefusesMissingFigures: a mount that does not report a figure stats shows (another
// version, something else on the socket) is an error naming it, never a printed 0.
func TestStatsRefusesMissingFigures(t *testing.T) {
	dir := t.TempDir()
	sock := ControlSocket(dir)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(sock)
	status := http.StatusOK
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, "# TYPE cassfs_samples gauge\ncassfs_samples 12\n")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	var out strings.Builder
	err = PrintStats(context.Background(), &out, dir, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not report cassfs_cache_bytes") || out.Len() > 0 {
		t.Errorf("stats of a mount reporting only cassfs_samples: %v, printed %q", err, out.String())
	}
	status = http.StatusInternalServerError
	if err := PrintStats(context.Background(), &out, dir, time.Millisecond); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("stats answered 500: %v", err)
	}
}

// TestControlSocketEndsAtClose: closing a control socket ends its server while the
// process goes on (cassfs serve serves and unmounts volumes for as long as it runs).
func TestControlSocketEndsAtClose(t *testing.T) {
	m := newMetrics()
	before := runtime.NumGoroutine()
	for range 10 {
		stop, err := m.serveControl(context.Background(), t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		stop()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after 10 control sockets were opened and closed, %d before", n, before)
	}
}
