package mount

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// dashboard is the Grafana dashboard of a mount's metrics.
const dashboard = "../contrib/grafana/cassfs.json"

// exportedMetrics returns the names of the series a mount exports: every metric its
// registry describes (with a cache directory, so the disk tier's are among them), whether
// or not it has a value yet, and a histogram's _bucket, _sum and _count series.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	st := memstore.New("ds", memstore.Options{})
	testkit.Check(t, st.SetLabels(ctx, []string{"class0", "class1"}))
	for i := range 4 {
		s, data := storetest.MakeSample("ds", i, i%2, 100+i)
		testkit.Check(t, st.Put(ctx, s, data, nil))
	}
	o := Defaults()
	o.CacheDir, o.CacheDirBytes = t.TempDir(), 1<<20
	m := testkit.Must(Open(ctx, st, o, slog.New(slog.DiscardHandler)))(t)
	t.Cleanup(m.Close)
	m.metrics.info("ds", t.TempDir(), m.Index.Len()) // what Serve registers
	ch := make(chan *prometheus.Desc)
	go func() { m.metrics.reg.Describe(ch); close(ch) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("no name in %s", d)
		}
		names[match[1]] = true
	}
	families := testkit.Must(m.metrics.reg.Gather())(t)
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	return names
}

// TestDashboardQueriesExportedMetrics: every PromQL query of the Grafana dashboard (panel
// targets and template variables) names at least one metric, and only metrics a mount
// exports: a renamed or removed metric fails here, not as an empty panel.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	var dash any
	if err := json.Unmarshal(testkit.Must(os.ReadFile(dashboard))(t), &dash); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var queries []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "expr" || k == "definition" || k == "query" && strings.Contains(s, "(")) {
					queries = append(queries, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(dash)
	if len(queries) < 20 {
		t.Fatalf("%s: found %d queries, want every panel's", dashboard, len(queries))
	}
	exported := exportedMetrics(t)
	// Metric names, as opposed to functions, label names, variables and keywords: what the
	// exporters' prefixes start.
	metric := regexp.MustCompile(`\b(?:cassfs|go|process)_[a-zA-Z0-9_:]*`)
	used := map[string]bool{}
	for _, q := range queries {
		names := metric.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", q)
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] {
				t.Errorf("query %q: %s is not a metric a mount exports", q, n)
			}
		}
	}
	// The areas the dashboard is for each have their metric on it.
	for _, n := range []string{"cassfs_read_bytes_total", "cassfs_fetch_seconds_bucket", "cassfs_requests_in_flight",
		"cassfs_cache_bytes", "cassfs_cache_hits_total", "cassfs_page_cache_pushes_total", "cassfs_fuse_requests_total",
		"cassfs_fetch_errors_total", "process_resident_memory_bytes"} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
	if t.Failed() {
		t.Logf("exported: %s", strings.Join(slices.Sorted(func(yield func(string) bool) {
			for n := range exported {
				if !yield(n) {
					return
				}
			}
		}), " "))
	}
}
