//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestMetricsEndpoint: reading an epoch in order through a mount with prefetching shows in
// the Prometheus endpoint: prefetches, a grown window, one fetch per sample, bytes cached.
func TestMetricsEndpoint(t *testing.T) {
	d := sharedDataset(t)
	m := startMount(t, d.name, "--metrics-addr", "127.0.0.1:0")
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; time.Sleep(50 * time.Millisecond) {
		if u := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(m.stderr.String()); u != nil {
			url = u[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the mount logged no metrics URL:\n%s", m.stderr.String())
		}
	}
	root := filepath.Join(m.dir, "all", "epoch-0")
	paths, _ := fileList(t, root)
	for _, p := range paths {
		if _, err := os.ReadFile(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	value := func(re string) float64 {
		t.Helper()
		mm := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(string(body))
		if mm == nil {
			t.Fatalf("metrics lack %s:\n%s", re, body)
		}
		v, _ := strconv.ParseFloat(mm[1], 64)
		return v
	}
	if v := value("cassfs_prefetched_total"); v < sharedCount {
		t.Errorf("cassfs_prefetched_total %v, want at least the %d samples read", v, sharedCount)
	}
	if v := value(`cassfs_prefetch_window\{split="all"\}`); v <= 64 {
		t.Errorf("prefetch window %v: it should have grown from 64 over %d reads", v, sharedCount)
	}
	if v := value("cassfs_fetch_seconds_count"); v < sharedCount || v > 2*sharedCount {
		t.Errorf("cassfs_fetch_seconds_count %v for %d samples", v, sharedCount)
	}
	if v := value("cassfs_cache_misses_total"); v != 0 {
		t.Errorf("%v reads missed the cache although the prefetcher ran ahead", v)
	}
	if v := value("cassfs_cache_bytes"); v <= 0 {
		t.Errorf("cassfs_cache_bytes %v", v)
	}
}
