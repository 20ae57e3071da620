package mount

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// scrapeMount reads the mount's metrics from its control socket.
func scrapeMount(ctx context.Context, dir string) (map[string]*dto.MetricFamily, error) {
	sock := ControlSocket(dir)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://cassfs/metrics", nil)
	resp, err := client.Do(req)
	if err != nil {
		if _, serr := os.Stat(sock); serr != nil {
			return nil, fmt.Errorf("no cassfs mount serves %s (no control socket %s); is it mounted by this user?", dir, sock)
		}
		return nil, fmt.Errorf("ask the mount at %s: %w", dir, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ask the mount at %s: %s", dir, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// family helpers: the value of an unlabelled metric, the sum over labels, by label.
type families map[string]*dto.MetricFamily

func metricNumber(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// quantile estimates a quantile of a histogram from its buckets (linear within a bucket).
func quantile(h *dto.Histogram, q float64) float64 {
	if h == nil || h.GetSampleCount() == 0 {
		return math.NaN()
	}
	rank := q * float64(h.GetSampleCount())
	prevBound, prevCount := 0.0, 0.0
	for _, b := range h.Bucket {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if c == prevCount {
				return b.GetUpperBound()
			}
			return prevBound + (b.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b.GetUpperBound(), c
	}
	return prevBound
}

// PrintStats prints the summary of the mount at dir, with rates over interval. It prints
// nothing but an error if the mount did not report a figure the summary shows (a mount of
// another version, or something else answering on the socket): never a 0 it did not read.
func PrintStats(ctx context.Context, out io.Writer, dir string, interval time.Duration) error {
	var w bytes.Buffer
	a, err := scrapeMount(ctx, dir)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(interval):
	}
	raw, err := scrapeMount(ctx, dir)
	if err != nil {
		return err
	}
	before, f := &scrape{fams: a}, &scrape{fams: raw}
	rate := func(name string) float64 { return (f.value(name) - before.value(name)) / interval.Seconds() }

	dataset := "?"
	if fam := f.fams["cassfs_info"]; fam != nil && len(fam.Metric) > 0 {
		dataset = label(fam.Metric[0], "dataset")
	}
	up := time.Duration(0)
	if st := f.value("process_start_time_seconds"); st > 0 {
		up = time.Since(time.Unix(int64(st), 0)).Round(time.Second)
	}
	fmt.Fprintf(&w, "cassfs at %s: dataset %s, %s samples, up %v\n", dir, dataset, humanize.Comma(int64(f.value("cassfs_samples"))), up)
	fmt.Fprintf(&w, "  served    %s files, %s by READs (now %.0f files/s, %s/s)\n",
		humanize.Comma(int64(f.value("cassfs_files_read_total"))), humanize.IBytes(uint64(f.value("cassfs_read_bytes_total"))),
		rate("cassfs_files_read_total"), humanize.IBytes(uint64(max(0, rate("cassfs_read_bytes_total")))))
	fmt.Fprintf(&w, "  cache     %s cached, %s of it not read yet; hits %s, misses %s, waits %s, evictions %s\n",
		humanize.IBytes(uint64(f.value("cassfs_cache_bytes"))), humanize.IBytes(uint64(f.value("cassfs_cache_unread_bytes"))),
		humanize.Comma(int64(f.value("cassfs_cache_hits_total"))), humanize.Comma(int64(f.value("cassfs_cache_misses_total"))),
		humanize.Comma(int64(f.value("cassfs_cache_waits_total"))), humanize.Comma(int64(f.value("cassfs_cache_evictions_total"))))
	var h *dto.Histogram
	if fam := f.fams["cassfs_fetch_seconds"]; fam != nil && len(fam.Metric) > 0 {
		h = fam.Metric[0].Histogram
	}
	ms := func(q float64) string {
		v := quantile(h, q)
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", v*1000)
	}
	// Fetches per file served: 1 when every fetch was read once; more when prefetched blobs
	// went unread or were fetched again, less when the cache served files read before.
	perFile := "-"
	if files := f.value("cassfs_files_read_total"); files > 0 {
		perFile = fmt.Sprintf("%.2f", float64(h.GetSampleCount())/files)
	}
	blocks := "no blocks"
	if n := f.value("cassfs_fetch_blocks_total"); n > 0 {
		blocks = fmt.Sprintf("%s in %s blocks (%.1f a block, %s read alone after a wait)", humanize.Comma(int64(f.value("cassfs_fetch_block_samples_total"))),
			humanize.Comma(int64(n)), f.value("cassfs_fetch_block_samples_total")/n, humanize.Comma(int64(f.value("cassfs_fetch_block_hedges_total"))))
	}
	fmt.Fprintf(&w, "  fetches   %s, %s per file served (now %.0f/s; p50 %s, p99 %s), %s in flight, %s hedged; %s\n",
		humanize.Comma(int64(h.GetSampleCount())), perFile, histRate(before.fams, f.fams, interval),
		ms(0.5), ms(0.99), humanize.Comma(int64(f.value("cassfs_requests_in_flight"))), humanize.Comma(int64(f.value("cassfs_fetch_hedges_total"))), blocks)
	var errs []string
	if fam := f.fams["cassfs_fetch_errors_total"]; fam != nil {
		for _, m := range fam.Metric {
			errs = append(errs, fmt.Sprintf("%s %s", label(m, "kind"), humanize.Comma(int64(metricNumber(m)))))
		}
	}
	sort.Strings(errs)
	fmt.Fprintf(&w, "  errors    %s\n", strings.Join(errs, ", "))
	if fam := f.fams["cassfs_prefetch_window"]; fam != nil {
		pos, rates, limits := map[string]string{}, map[string]float64{}, map[string]float64{}
		if pf := f.fams["cassfs_prefetch_position"]; pf != nil {
			for _, m := range pf.Metric {
				pos[label(m, "split")] = fmt.Sprintf("epoch %s position %s", label(m, "epoch"), humanize.Comma(int64(metricNumber(m))))
			}
		}
		for name, into := range map[string]map[string]float64{"cassfs_prefetch_rate": rates, "cassfs_prefetch_limit": limits} {
			if pf := f.fams[name]; pf != nil {
				for _, m := range pf.Metric {
					into[label(m, "split")] = metricNumber(m)
				}
			}
		}
		lat := f.value("cassfs_prefetch_latency_seconds") * 1000
		var lines []string
		for _, m := range fam.Metric {
			split := label(m, "split")
			lines = append(lines, fmt.Sprintf("  prefetch  %s: %s, window %s, up to %.0f in flight (readers at %.0f/s, latency %.1f ms)", split, pos[split],
				humanize.Comma(int64(metricNumber(m))), limits[split], rates[split], lat))
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintln(&w, l)
		}
	}
	if f.fams["cassfs_disk_cache_bytes"] != nil {
		hits, misses := f.value("cassfs_disk_cache_hits_total"), f.value("cassfs_disk_cache_misses_total")
		fmt.Fprintf(&w, "  disk      %s in %s files; %s hits, %s misses (%.1f%% hit); %s evicted, %s corrupt, %s write errors\n",
			humanize.IBytes(uint64(f.value("cassfs_disk_cache_bytes"))), humanize.Comma(int64(f.value("cassfs_disk_cache_entries"))),
			humanize.Comma(int64(hits)), humanize.Comma(int64(misses)), 100*hits/max(hits+misses, 1),
			humanize.Comma(int64(f.value("cassfs_disk_cache_evictions_total"))), humanize.Comma(int64(f.value("cassfs_disk_cache_corrupt_total"))), humanize.Comma(int64(f.value("cassfs_disk_cache_write_errors_total"))))
	}
	// Requests per file: a reader opening a file looks its name up once (or the helper
	// does, ahead of it: --look-ahead), so requests per sample lookup are what a file costs
	// in round trips through the daemon (a file read from the page cache, pushed or kept
	// from an earlier read, costs no READ).
	if fam := f.fams["cassfs_fuse_requests_total"]; fam != nil {
		ops := map[string]float64{}
		for _, m := range fam.Metric {
			ops[label(m, "op")] = metricNumber(m)
		}
		files := f.value("cassfs_sample_lookups_total")
		var per []string
		for _, op := range []string{"lookup", "read", "getattr", "open", "release", "flush", "ioctl"} {
			v := "-"
			if files > 0 {
				v = fmt.Sprintf("%.2f", ops[op]/files)
			}
			per = append(per, op+" "+v)
		}
		fmt.Fprintf(&w, "  requests  %s files looked up; per file: %s\n", humanize.Comma(int64(files)), strings.Join(per, ", "))
	} else {
		before.missing = append(before.missing, "cassfs_fuse_requests_total")
	}
	if fam := f.fams["cassfs_page_cache_pushes_total"]; fam != nil {
		res := map[string]float64{}
		for _, m := range fam.Metric {
			res[label(m, "result")] = metricNumber(m)
		}
		fmt.Fprintf(&w, "  pushed    %s files (%s) into the page cache ahead of readers; %s still there (not pushed again; %s read all the same, %s reclaims noticed, %s files found paged out by %s looks and %s files looked at as they neared the readers); %s not known to the kernel yet, %s refused, %s left to READs for the memory limit; %s names looked up ahead (%s streamed too late), %s of their pushes lost, %s bound by readers' listings\n",
			humanize.Comma(int64(res["pushed"])), humanize.IBytes(uint64(f.value("cassfs_page_cache_pushed_bytes_total"))), humanize.Comma(int64(res["resident"])), humanize.Comma(int64(f.value("cassfs_page_cache_resident_reads_total"))), humanize.Comma(int64(f.value("cassfs_page_cache_reclaims_total"))), humanize.Comma(int64(f.value("cassfs_page_cache_checked_gone_total"))), humanize.Comma(int64(f.value("cassfs_page_cache_checks_total"))), humanize.Comma(int64(f.value("cassfs_page_cache_nearing_checked_total"))), humanize.Comma(int64(res["unknown"])), humanize.Comma(int64(res["failed"])), humanize.Comma(int64(res["over_limit"])),
			humanize.Comma(int64(f.value("cassfs_lookahead_names_total"))), humanize.Comma(int64(f.value("cassfs_streamed_names_late_total"))), humanize.Comma(int64(f.value("cassfs_page_cache_pushes_lost_total"))),
			humanize.Comma(int64(f.value("cassfs_reader_listed_names_total"))))
		if n := f.value("cassfs_record_pushes_total"); n > 0 {
			fmt.Fprintf(&w, "  records   %s samples pushed into record files; %s past epochs' files let go\n",
				humanize.Comma(int64(n)), humanize.Comma(int64(f.value("cassfs_record_files_dropped_total"))))
		}
	} else {
		before.missing = append(before.missing, "cassfs_page_cache_pushes_total")
	}
	fmt.Fprintf(&w, "  daemon    %s resident, %s heap, %.0f goroutines\n",
		humanize.IBytes(uint64(f.value("process_resident_memory_bytes"))), humanize.IBytes(uint64(f.value("go_memstats_heap_alloc_bytes"))), f.value("go_goroutines"))
	if f.fams["cassfs_memory_usage_bytes"] != nil {
		limit := "none"
		if l := f.value("cassfs_memory_limit_bytes"); !math.IsInf(l, 1) {
			limit = humanize.IBytes(uint64(l))
		}
		fmt.Fprintf(&w, "  memory    cgroup limit %s, %s charged, of which %s page cache (pushed pages are charged to the daemon)\n",
			limit, humanize.IBytes(uint64(f.value("cassfs_memory_usage_bytes"))), humanize.IBytes(uint64(f.value("cassfs_memory_page_cache_bytes"))))
	}
	if missing := slices.Compact(slices.Sorted(slices.Values(append(before.missing, f.missing...)))); len(missing) > 0 {
		return fmt.Errorf("the mount at %s did not report %s: is it served by a cassfs of another version?", dir, strings.Join(missing, ", "))
	}
	_, err = out.Write(w.Bytes())
	return err
}

// scrape is one reading of a mount's metrics; value records the metrics it did not find.
type scrape struct {
	fams    families
	missing []string
}

func (s *scrape) value(name string) float64 {
	fam := s.fams[name]
	if fam == nil || len(fam.Metric) == 0 {
		s.missing = append(s.missing, name)
		return 0
	}
	return metricNumber(fam.Metric[0])
}

// histRate is the rate of a histogram's observation count (cassfs_fetch_seconds is a
// histogram: its count lives in the histogram, not in a family of its own).
func histRate(before, after families, interval time.Duration) float64 {
	count := func(f families) float64 {
		if fam := f["cassfs_fetch_seconds"]; fam != nil && len(fam.Metric) > 0 {
			return float64(fam.Metric[0].Histogram.GetSampleCount())
		}
		return 0
	}
	return (count(after) - count(before)) / interval.Seconds()
}

// Counters returns the mount's CPU seconds and database fetches so far, read from
// its control socket; ok is false if it cannot be asked.
func Counters(ctx context.Context, dir string) (cpu, fetches float64, ok bool) {
	fams, err := scrapeMount(ctx, dir)
	if err != nil {
		return 0, 0, false
	}
	f := &scrape{fams: fams}
	if h := f.fams["cassfs_fetch_seconds"]; h != nil && len(h.Metric) > 0 {
		fetches = float64(h.Metric[0].GetHistogram().GetSampleCount())
	}
	cpu = f.value("process_cpu_seconds_total")
	return cpu, fetches, len(f.missing) == 0
}
