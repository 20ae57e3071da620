// Package ingest loads an ImageFolder-style tree (root/<class>/<file>) and an optional
// metadata CSV into a dataset. It owns the walk, the CSV's validation and the parallel,
// idempotent writes; it programs against store.Store and must not know CQL or FUSE.
//
// # Decisions
//
//   - Validate first, write second. The tree is walked and the CSV parsed completely before
//     the first write, so a CSV problem (clashing column, duplicated or missing path) or a
//     changed set of classes aborts with nothing written.
//   - File problems are per file. An unreadable, empty, oversized, hidden or wrongly placed
//     file, or one with an extension the readers cannot decode, is skipped with its reason
//     and the rest is ingested; the run then reports failure (Report.Skipped is non-empty) so
//     scripts notice.
//   - Database problems abort. A failed write means the cluster is unwell, not the file; the
//     run stops and says how to resume.
//   - Idempotent and resumable. Sample ids derive from dataset and relative path
//     (store.SampleID), the store writes blob before metadata, and samples already stored with
//     the same checksum and metadata are not written again, so re-running after an
//     interruption finishes the job without duplicates.
//   - Labels are the class directory names in bytewise order, the order DALI and torchvision
//     give them; a class directory with no ingestible file is a class too, as the readers
//     count it. A dataset's classes are fixed by its first ingest: adding a class later would
//     renumber the labels of stored samples, so it is refused.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// Extensions are the file extensions both DALI's fn.readers.file and torchvision's
// ImageFolder accept (compared case-insensitively).
var Extensions = []string{".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp"}

// DefaultMaxSize is the default limit on one file's size: 1 MiB under Cassandra's default
// native_transport_max_frame_size (16 MiB), which bounds one request, blob and all, and
// half a commit log segment (the largest mutation, also 16 MiB by default).
const DefaultMaxSize = 15 << 20

// Options configure an ingest.
type Options struct {
	// Root is the dataset tree, root/<class>/<file> (root/<file> if Unlabeled).
	Root string
	// Unlabeled takes the files directly in Root as one class, UnlabeledClass: a dataset
	// without labels (pure segmentation, with Targets), mounted the same way.
	Unlabeled bool
	// Targets, if set, is a tree of target files beside Root, one per image at the same
	// relative path with any extension (see targets.go).
	Targets string
	// CSV is an optional metadata file: a header row, one row per file, keyed by the
	// relative path "<class>/<file>" in the column named KeyColumn.
	CSV string
	// KeyColumn names the CSV column holding the path (default "path").
	KeyColumn string
	// MaxSize is the largest file accepted, in bytes (default DefaultMaxSize).
	MaxSize int64
	// Workers is the number of files read and written at once (default 16).
	Workers int
	// Progress, if set, is called after every file (from several goroutines at once).
	Progress func(Progress)
	// OnPlan, if set, is called once the tree is walked, with the number of files and bytes
	// to process (for a progress bar).
	OnPlan func(files int, bytes int64)
	// NoSnapshot: store no index snapshot at the end (see Run).
	NoSnapshot bool
	// OnSnapshot, if set, is called when the files are done and the index snapshot begins.
	OnSnapshot func()
}

// Progress counts the work done so far.
type Progress struct {
	Files int64 // files processed (written, unchanged or skipped)
	Bytes int64 // bytes of files processed
}

// Skip is a file that was not ingested and why.
type Skip struct {
	Path   string // relative to the root
	Reason string
}

// Report summarizes an ingest.
type Report struct {
	Classes   []string
	Written   int64 // samples written
	Unchanged int64 // samples already stored with the same content and metadata
	Bytes     int64 // bytes of the samples written
	Skipped   []Skip
	Elapsed   time.Duration // the files' ingest, without the snapshot
	Snapshot  SnapshotReport
}

// Print writes the report as `cassfs ingest` shows it: the files skipped and why, the
// totals, and the index snapshot.
func (rep Report) Print(w io.Writer, dataset string) {
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
	}
	secs := rep.Elapsed.Seconds()
	fmt.Fprintf(w, "dataset %s: %d classes; %d files written (%.1f MB), %d unchanged, %d skipped; %.1fs, %.0f files/s, %.1f MB/s\n",
		dataset, len(rep.Classes), rep.Written, float64(rep.Bytes)/1e6, rep.Unchanged, len(rep.Skipped),
		secs, float64(rep.Written)/max(secs, 1e-9), float64(rep.Bytes)/1e6/max(secs, 1e-9))
	switch s := rep.Snapshot; {
	case s.Err != nil:
		fmt.Fprintf(w, "index snapshot not stored: %v\n(mounts will scan the samples instead; `cassfs dataset snapshot %s` stores one)\n", s.Err, dataset)
	case s.Samples > 0:
		fmt.Fprintf(w, "index snapshot stored for mounts to start from: %d samples, %.1f MB, %.1fs\n", s.Samples, float64(s.Bytes)/1e6, s.Elapsed.Seconds())
	}
}

// SnapshotReport says how storing the index snapshot went.
type SnapshotReport struct {
	Samples int   // samples in it; 0 if none was stored
	Bytes   int64 // its size
	Elapsed time.Duration
	Err     error // why none was stored, if one was to be
}

type file struct {
	rel   string // "<class>/<file>", slash-separated
	abs   string
	label int
	size  int64
	meta  map[string]string
	// The target file, with Options.Targets.
	target     string // its path
	targetExt  string
	targetSize int64
}

// UnlabeledClass is the one class of an unlabeled dataset (Options.Unlabeled).
const UnlabeledClass = "unlabeled"

// Plan is a validated ingest: the tree walked and the CSV parsed, nothing written yet.
type Plan struct {
	opts    Options
	classes []string
	files   []file
	skipped []Skip
	columns []string
}

// Files is the number of files the plan will ingest.
func (p *Plan) Files() int { return len(p.files) }

// Prepare walks opts.Root and parses opts.CSV. An error here means nothing can be ingested;
// files that merely cannot be ingested are in the plan's skip list.
func Prepare(opts Options) (*Plan, error) {
	if opts.KeyColumn == "" {
		opts.KeyColumn = "path"
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	walker := walk
	if opts.Unlabeled {
		walker = walkUnlabeled
	}
	classes, files, skipped, err := walker(opts.Root, opts.MaxSize)
	if err != nil {
		return nil, err
	}
	p := &Plan{opts: opts, classes: classes, files: files, skipped: skipped}
	if opts.Targets != "" && len(files) > 0 {
		if err := pairTargets(opts.Targets, opts.Unlabeled, opts.MaxSize, files, skipped); err != nil {
			return nil, err
		}
	}
	if opts.CSV != "" {
		if p.columns, err = applyCSV(opts.CSV, opts.KeyColumn, opts.Root, opts.Unlabeled, files, skipped); err != nil {
			return nil, err
		}
	}
	if opts.Unlabeled {
		// Reported as the user names them: relative to the root, which holds the files.
		for k := range p.skipped {
			p.skipped[k].Path = strings.TrimPrefix(p.skipped[k].Path, UnlabeledClass+"/")
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no ingestible files under %s (expected <class>/<file> with one of %s)", opts.Root, strings.Join(Extensions, " "))
	}
	return p, nil
}

// filledClasses are the plan's classes that hold a file to ingest.
func (p *Plan) filledClasses() []string {
	filled := map[int]bool{}
	for _, f := range p.files {
		filled[f.label] = true
	}
	var out []string
	for l, c := range p.classes {
		if filled[l] {
			out = append(out, c)
		}
	}
	return out
}

// relabel returns the plan's files labelled by their class's index in classes, which holds
// every class of a file.
func (p *Plan) relabel(classes []string) []file {
	out := slices.Clone(p.files)
	for k := range out {
		out[k].label = slices.Index(classes, p.classes[out[k].label])
	}
	return out
}

// Run ingests the plan into st.
func (p *Plan) Run(ctx context.Context, st store.Store) (Report, error) {
	start := time.Now()
	opts, classes, files, columns := p.opts, p.classes, p.files, p.columns
	rep := Report{Classes: classes, Skipped: slices.Clone(p.skipped)}
	have, err := st.Labels(ctx)
	if err != nil {
		return rep, err
	}
	if len(have) > 0 && !slices.Equal(have, classes) && slices.Equal(have, p.filledClasses()) {
		// A dataset ingested before empty class directories were classes: keep its labels.
		classes, files = have, p.relabel(have)
		rep.Classes = classes
	}
	if len(have) > 0 && !slices.Equal(have, classes) {
		return rep, fmt.Errorf("dataset %q already has classes %q but %s has %q: classes cannot change after the first ingest (labels would be renumbered); ingest into a new dataset",
			st.Dataset(), have, opts.Root, classes)
	}
	// The catalogue changes from here: snapshots taken before are stale (store's "Index
	// snapshots"), and again once the last write is done, below.
	if err := st.MarkChanged(ctx); err != nil {
		return rep, err
	}
	if err := st.AddColumns(ctx, columns); err != nil {
		return rep, err
	}
	if len(have) == 0 {
		if err := st.SetLabels(ctx, classes); err != nil {
			return rep, err
		}
	}
	stored := map[uuid.UUID]store.Sample{}
	if err := st.Scan(ctx, func(s store.Sample) error { stored[s.ID] = s; return nil }); err != nil {
		return rep, fmt.Errorf("list stored samples of dataset %q: %w", st.Dataset(), err)
	}
	if err := p.checkTargetsAgree(st.Dataset(), stored); err != nil {
		return rep, err
	}
	if opts.OnPlan != nil {
		var total int64
		for _, f := range files {
			total += f.size + f.targetSize
		}
		opts.OnPlan(len(files), total)
	}

	// The first database error stops the run: it cancels the writes in flight, no file is
	// started after it, and it is the error reported.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Workers)
	var (
		mu       sync.Mutex // guards rep.Skipped
		prog     Progress
		written  atomic.Int64
		same     atomic.Int64
		wbytes   atomic.Int64
		progress = func(size int64) {
			f := atomic.AddInt64(&prog.Files, 1)
			b := atomic.AddInt64(&prog.Bytes, size)
			if opts.Progress != nil {
				opts.Progress(Progress{Files: f, Bytes: b})
			}
		}
	)
	for _, f := range files {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // stopped while this file waited for a worker
			}
			res, err := ingestFile(gctx, st, f, opts.MaxSize, stored)
			switch {
			case err != nil && res == resSkipped:
				mu.Lock()
				rep.Skipped = append(rep.Skipped, Skip{Path: f.rel, Reason: err.Error()})
				mu.Unlock()
				err = nil // the file's problem, not the run's
			case err != nil:
				// A database error: returned, it stops the run.
			case res == resUnchanged:
				same.Add(1)
			default:
				written.Add(1)
				wbytes.Add(f.size + f.targetSize)
			}
			progress(f.size + f.targetSize)
			return err
		})
	}
	fatal := g.Wait()
	stored = nil
	rep.Written, rep.Unchanged, rep.Bytes = written.Load(), same.Load(), wbytes.Load()
	rep.Elapsed = time.Since(start)
	slices.SortFunc(rep.Skipped, func(a, b Skip) int { return strings.Compare(a.Path, b.Path) })
	// Even after a failure or an interrupt: writes were made. (Each request has the
	// store's own deadline.)
	marked := st.MarkChanged(context.WithoutCancel(ctx))
	if fatal == nil && ctx.Err() == nil && !opts.NoSnapshot {
		rep.Snapshot = p.snapshot(ctx, st, marked)
	}
	if fatal != nil {
		return rep, fmt.Errorf("ingest stopped after %d of %d files: %w (nothing partial is listed; run the same ingest again to resume)",
			rep.Written+rep.Unchanged, len(files), fatal)
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("ingest interrupted after %d of %d files: %w (run the same ingest again to resume)", rep.Written+rep.Unchanged, len(files), err)
	}
	return rep, nil
}

// snapshot stores the index snapshot mounts start from. Its failure fails no ingest: the
// samples are in, and a mount without a snapshot scans them.
func (p *Plan) snapshot(ctx context.Context, st store.Store, marked error) SnapshotReport {
	if marked != nil {
		return SnapshotReport{Err: marked}
	}
	if p.opts.OnSnapshot != nil {
		p.opts.OnSnapshot()
	}
	start := time.Now()
	ix, n, err := index.StoreSnapshot(ctx, st)
	if err != nil {
		return SnapshotReport{Err: err, Elapsed: time.Since(start)}
	}
	return SnapshotReport{Samples: ix.Len(), Bytes: n, Elapsed: time.Since(start)}
}

type result int

const (
	resWritten result = iota
	resUnchanged
	resSkipped
)

func ingestFile(ctx context.Context, st store.Store, f file, maxSize int64, stored map[uuid.UUID]store.Sample) (result, error) {
	data, err := os.ReadFile(f.abs)
	if err != nil {
		return resSkipped, fmt.Errorf("unreadable: %v", unwrapPath(err))
	}
	// The size may have changed since the walk.
	if err := checkSize(int64(len(data)), maxSize); err != nil {
		return resSkipped, err
	}
	s := store.Sample{
		ID:        store.SampleID(st.Dataset(), f.rel),
		Label:     f.label,
		Name:      f.rel,
		Size:      int64(len(data)),
		Checksum:  store.Checksum(data),
		CRC32C:    store.CRC32C(data),
		HasCRC32C: true,
		Meta:      f.meta,
	}
	var target []byte
	if f.target != "" {
		if target, err = os.ReadFile(f.target); err != nil {
			return resSkipped, fmt.Errorf("target unreadable: %v", unwrapPath(err))
		}
		if err := checkSize(int64(len(target)), maxSize); err != nil {
			return resSkipped, fmt.Errorf("target %v", err)
		}
		s.Target = &store.Target{Ext: f.targetExt, Size: int64(len(target)), Checksum: store.Checksum(target), CRC32C: store.CRC32C(target)}
	}
	// A sample stored before samples had a CRC32C is written again to gain one.
	if old, ok := stored[s.ID]; ok && old.Checksum == s.Checksum && old.HasCRC32C && old.Label == s.Label && store.SameMeta(old.Meta, s.Meta) &&
		(old.Target == nil) == (s.Target == nil) && (s.Target == nil || *old.Target == *s.Target) {
		return resUnchanged, nil
	}
	if err := st.Put(ctx, s, data, target); err != nil {
		return resWritten, err
	}
	return resWritten, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func checkSize(size, maxSize int64) error {
	switch {
	case size == 0:
		return errors.New("empty file (zero bytes)")
	case size > maxSize:
		return fmt.Errorf("%d bytes, over the size limit of %d (see --max-size)", size, maxSize)
	}
	return nil
}

// checkName reports why a file or class name cannot appear in the filesystem the readers
// see, or nil.
func checkName(name string) error {
	switch {
	case len(name) > index.MaxNameLen:
		return fmt.Errorf("name is %d bytes; the mount puts a position of up to 11 bytes before it and a name may have 255, so keep it to %d", len(name), index.MaxNameLen)
	case strings.HasPrefix(name, "."):
		return errors.New("hidden name (leading '.'); readers would skip it or count it as a class")
	case strings.ContainsAny(name, "\n\r"):
		return errors.New("name contains a line break, which file_list.txt cannot carry")
	case strings.TrimRightFunc(name, unicode.IsSpace) != name:
		return errors.New("name ends in whitespace, which file_list.txt cannot carry")
	}
	return nil
}

// checkTargetsAgree refuses a dataset whose samples would not all have a target or all
// have none: the mount shows targets in lockstep with the images, for every sample.
func (p *Plan) checkTargetsAgree(dataset string, stored map[uuid.UUID]store.Sample) error {
	with := p.opts.Targets != ""
	inPlan := make(map[uuid.UUID]bool, len(p.files))
	for _, f := range p.files {
		inPlan[store.SampleID(dataset, f.rel)] = true
	}
	for id, s := range stored {
		if (s.Target != nil) != with && !inPlan[id] {
			if with {
				return fmt.Errorf("dataset %q has samples without targets (%s, ...) that this ingest does not cover: every sample of a dataset has a target or none does; ingest the whole tree with --targets, or into a new dataset", dataset, s.Name)
			}
			return fmt.Errorf("dataset %q has targets (%s has one): ingest with --targets, so every sample has one", dataset, s.Name)
		}
	}
	return nil
}
