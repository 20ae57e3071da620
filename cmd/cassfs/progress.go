package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressView shows long work: a bar on a terminal, a line every few seconds otherwise.
type progressView struct {
	mode  string
	what  string
	out   io.Writer
	mu    sync.Mutex
	bar   *progressbar.ProgressBar // guarded by mu
	total int64                    // guarded by mu
	last  time.Time                // guarded by mu
	start time.Time
}

func newProgress(out io.Writer, mode, what string) *progressView {
	if mode == "auto" {
		mode = "lines"
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	return &progressView{mode: mode, what: what, out: out, start: time.Now(), last: time.Now()}
}

func (p *progressView) plan(files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = int64(files)
	if p.mode == "bar" {
		p.bar = progressbar.NewOptions64(int64(files),
			progressbar.OptionSetWriter(p.out),
			progressbar.OptionSetDescription(p.what),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("files"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetPredictTime(true),
		)
	}
}

func (p *progressView) update(n, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.bar != nil:
		p.bar.Set64(n)
	case p.mode == "lines" && (time.Since(p.last) >= 5*time.Second || n == p.total):
		p.last = time.Now()
		mb := ""
		if bytes > 0 {
			mb = fmt.Sprintf(", %.1f MB", float64(bytes)/1e6)
		}
		fmt.Fprintf(p.out, "%s: %d/%d files%s, %.0f files/s\n", p.what, n, p.total, mb, float64(n)/time.Since(p.start).Seconds())
	}
}

func (p *progressView) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.out)
		p.bar = nil
	}
}

// snapshotting ends the files' progress and says what comes next (see ingest.Run).
func (p *progressView) snapshotting() {
	p.finish()
	if p.mode != "none" {
		fmt.Fprintf(p.out, "%s: storing the index snapshot mounts start from\n", p.what)
	}
}
