package mount

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cassfs/cassfs/splits"
	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
)

// MaxInFlight is the default of cassfs mount's --max-in-flight, the most database requests
// a mount has in flight: room for the prefetches a long link needs (Options.PrefetchInFlight)
// and for demand reads beside them.
const MaxInFlight = 1280

// OptionInfo describes one of a mount's Options: how it is named, explained and parsed.
// Its Name is the `cassfs mount` flag (--Name), the key of a configuration file (--config)
// and, if Attribute, the volume attribute (VolumeFromAttributes) that set it; all three take
// the same text, parsed by the same Value.
type OptionInfo struct {
	Name string
	Help string
	// Attribute says whether a volume may set the option. A volume may not set what only
	// the node's operator should decide (the profiler, FUSE debug logs); other users may
	// always read a volume's mount.
	Attribute bool
	// value is the option's field of o as a flag value: Set parses text into it, String
	// gives it back as text, Type names its kind in help texts.
	value func(o *Options) pflag.Value
}

// Default is the option's default as the flag shows it ("" for none).
func (oi OptionInfo) Default() string {
	d := Defaults()
	return oi.value(&d).String()
}

// OptionsInfo is every option of a mount. The flags (AddFlags), the volume attributes
// (VolumeFromAttributes) and the documentation's list (OptionsList, in
// docs/mount-options.md) are made from it: an option is declared here once.
var OptionsInfo = []OptionInfo{
	{"seed", "seed of the epoch permutations (same seed, same orders everywhere)", true,
		func(o *Options) pflag.Value {
			return pflagValue(func(fs *pflag.FlagSet) { fs.Uint64Var(&o.Seed, "v", o.Seed, "") })
		}},
	{"epochs-listed", "epoch directories a split lists (any epoch-N resolves)", true, intOption(func(o *Options) *int { return &o.EpochsListed })},
	{"epoch-views", "epoch orders kept in memory, counted in orders of the whole dataset (8 bytes per sample each; the W shard directories of an epoch weigh one)", true,
		intOption(func(o *Options) *int { return &o.EpochViews })},
	{"cache-size", fmt.Sprintf("bytes of file content cached in memory (e.g. 512MiB, 4GiB); the daemon's resident memory stays under this plus ~%d bytes per sample plus %d MiB (more with stored splits and --epoch-views: 8 bytes per member per view; with each shard directory or resumed view being read beside the splits: 8 bytes per sample; with metadata columns: ~4 bytes per column and each distinct value once)", RSSPerSample, RSSOverhead>>20), true,
		func(o *Options) pflag.Value { return &sizeValue{uint: &o.CacheBytes} }},
	{"cache-dir", "also keep fetched files in this directory (e.g. on local NVMe), for later epochs and later mounts; bounded by --cache-dir-size; one mount of a dataset at a time per directory (default: off)", true,
		stringOption(func(o *Options) *string { return &o.CacheDir })},
	{"cache-dir-size", "bytes --cache-dir may hold (e.g. 200GiB); once full, files no known epoch order reads make room for ones read again", true,
		func(o *Options) pflag.Value { return &sizeValue{int: &o.CacheDirBytes} }},
	{"prefetch", "largest read-ahead window, in samples, along each epoch's order; the window sizes itself below it (0: no prefetching)", true,
		intOption(func(o *Options) *int { return &o.Prefetch })},
	{"order", "arrival: a name is bound on first lookup to an already fetched sample of its class, so no reader waits behind a slow fetch; strict: a name always means the same sample (reproducible)", true,
		func(o *Options) pflag.Value { return &o.Order }},
	{"prefetch-in-flight", "most prefetch requests in flight; the window sizes itself below it. The prefetches of every dataset the process serves hold at most four fifths of --max-in-flight together, so demand reads always find room", true,
		intOption(func(o *Options) *int { return &o.PrefetchInFlight })},
	{"block-samples", "most samples the prefetcher asks the database for in one request (a block; each block goes to a node holding all its samples, bounded at 4 MiB by the samples' sizes); a reader waiting for a sample asks for it alone, and for a sample of a block not answered within --speculative-after (or 1 s) alone as well; 0 or 1: one request per sample", true,
		intOption(func(o *Options) *int { return &o.BlockSamples })},
	{"record-shard-size", "size each tar of an epoch's record view (<split>/epoch-N.wds/shard-K.tar, WebDataset samples in the epoch's order) aims at: every shard of a split holds the same number of samples, this size over the split's mean sample (e.g. 64MiB, 1GiB)", true,
		func(o *Options) pflag.Value { return &sizeValue{int: &o.RecordShardBytes} }},
	{"max-background", "kernel's limit on concurrent reads to cassfs", true, intOption(func(o *Options) *int { return &o.MaxBackground })},
	{"pprof", "also serve Go's profiler at /debug/pprof/ on --metrics-addr and the control socket (e.g. go tool pprof http://127.0.0.1:9108/debug/pprof/profile?seconds=10)", false,
		boolOption(func(o *Options) *bool { return &o.Pprof })},
	{"allow-other", "let users other than the mounting one access the mount", false, boolOption(func(o *Options) *bool { return &o.AllowOther })},
	{"debug-fuse", "log every FUSE request (to the mount's log: --log-file if given)", false, boolOption(func(o *Options) *bool { return &o.DebugFUSE })},
	{"scan-index", "build the index by scanning the samples even if the dataset has a current index snapshot (which ingest stores, and a mount otherwise starts from)", true,
		boolOption(func(o *Options) *bool { return &o.ScanIndex })},
	{"splits", "comma-separated stored splits to show beside \"all\" (* for every stored split, empty for none)", true, stringOption(func(o *Options) *string { return &o.Splits })},
	{"shard", "show only rank I of N's part of every epoch, as I/N (e.g. 0/4); every rank mounts with the same --seed", true,
		func(o *Options) pflag.Value { return (*shardValue)(&o.Shard) }},
	{"speculative-after", "on a cluster of several nodes, send a read not answered after this long once more, to a replica picked anew, and take the first answer (0: never)", true,
		func(o *Options) pflag.Value {
			return pflagValue(func(fs *pflag.FlagSet) { fs.DurationVar(&o.HedgeAfter, "v", o.HedgeAfter, "") })
		}},
	{"shard-pad", "with --shard, and in shard directories (<split>/shard-R-of-W/), repeat the epoch's first samples so that every rank gets the same number", true,
		boolOption(func(o *Options) *bool { return &o.Shard.Pad })},
	{"look-ahead", "with --push, have a helper process look up this many names of each epoch ahead of the readers, along its order, so that the kernel knows them and their pushed bytes before the readers open them: names of samples already fetched (or held in --cache-dir) one by one, or a class directory whole where all its samples are (or, with --stream-names, a chunk at a time where they are not); it starts once readers have looked up 64 names of an epoch in order, and one name in 32 is left to them, one in 128 in an epoch bound while they were between epochs (their lookups show how far they got); 0: off", true,
		intOption(func(o *Options) *int { return &o.LookAhead })},
	{"stream-names", "with --look-ahead, read the class directories of a cold epoch ahead of the readers a chunk at a time where fetches come back within 50 ms, binding their names as read, in the order the prefetcher fetches: a fifth to a tenth of the requests per file and a quarter less daemon CPU in a first epoch at a fast link; a reader then waits for its own sample's fetch (a stuck one is sent to another replica after --speculative-after), where arrival binding (--order arrival) would give it one that came (false: names are looked up ahead only over samples fetched)", true,
		boolOption(func(o *Options) *bool { return &o.StreamNames })},
	{"push", "write prefetched files into the kernel's page cache ahead of their readers (samples whose inode the kernel knows: read before, under any name), so reading them sends no request to cassfs; --cache-size still bounds what the daemon holds (pushed pages are the kernel's, reclaimed like any file data). With --cache-dir, files are then read from it ahead and pushed (unless the page cache still has them) instead of passed through (false: opens of its files are passed through where the kernel allows it)", true,
		boolOption(func(o *Options) *bool { return &o.Push })},
	{"records-at", "also mount the record views (<split>/epoch-N.wds/ and shard directories' own) at this directory, on a FUSE connection of their own: there, each tar of an epoch whose samples are all held (in memory or --cache-dir) is written, between epochs, to a local file (in --cache-dir if set, else the temporary directory; unlinked, as much as the disk and half the memory available allow) and opened in passthrough mode (Linux 6.9+, root), so readers of a warm epoch read it as fast as tars on local disk; other tars read as on the main mount (several datasets: DIR/<dataset>; default: off)", false,
		stringOption(func(o *Options) *string { return &o.RecordsAt })},
}

// AddFlags adds a flag to fs for every option of OptionsInfo, setting o's field; o's values
// are the flags' defaults.
func AddFlags(fs *pflag.FlagSet, o *Options) {
	for _, oi := range OptionsInfo {
		f := fs.VarPF(oi.value(o), oi.Name, "", oi.Help)
		if f.Value.Type() == "bool" {
			f.NoOptDefVal = "true" // --push means --push=true
		}
	}
}

// pflagValue returns the value of the one flag add adds (named "v"): pflag's own parsing,
// help text and defaults for the kinds it knows.
func pflagValue(add func(fs *pflag.FlagSet)) pflag.Value {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	add(fs)
	return fs.Lookup("v").Value
}

func intOption(field func(*Options) *int) func(*Options) pflag.Value {
	return func(o *Options) pflag.Value {
		p := field(o)
		return pflagValue(func(fs *pflag.FlagSet) { fs.IntVar(p, "v", *p, "") })
	}
}

func boolOption(field func(*Options) *bool) func(*Options) pflag.Value {
	return func(o *Options) pflag.Value {
		p := field(o)
		return pflagValue(func(fs *pflag.FlagSet) { fs.BoolVar(p, "v", *p, "") })
	}
}

func stringOption(field func(*Options) *string) func(*Options) pflag.Value {
	return func(o *Options) pflag.Value {
		p := field(o)
		return pflagValue(func(fs *pflag.FlagSet) { fs.StringVar(p, "v", *p, "") })
	}
}

// ParseSize parses a byte size as cassfs's options take it: a number with an optional
// unit, decimal (kB, MB, GB...) or binary (KiB, MiB, GiB...), "512MiB", "4GiB", "1.5 TB".
func ParseSize(s string) (uint64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, errors.New("want a size such as 512MiB or 4GiB")
	}
	return n, nil
}

// sizeValue is a size option (ParseSize): of a uint64 field, or of an int64 one, which
// holds a positive size of at most 2^62, or "" for none. It shows as it was set, else the size in binary units, the zero
// size as none.
type sizeValue struct {
	uint *uint64
	int  *int64
	text string // as set
}

func (v *sizeValue) Set(s string) error {
	var n uint64
	var err error
	if s != "" { // "": none, as the flag's default shows it
		n, err = ParseSize(s)
	}
	switch {
	case err != nil:
		return err
	case v.int != nil && (n == 0 && s != "" || n > 1<<62):
		return errors.New("want a positive size such as 200GiB")
	case v.int != nil:
		*v.int = int64(n)
	default:
		*v.uint = n
	}
	v.text = s
	return nil
}

func (v *sizeValue) String() string {
	if v.text != "" {
		return v.text
	}
	var n uint64
	if v.int != nil {
		n = uint64(*v.int)
	} else if v.uint != nil {
		n = *v.uint
	}
	if n == 0 {
		return ""
	}
	return humanize.IBytes(n)
}

// Type is "string": the flag's help shows it as text.
func (v *sizeValue) Type() string { return "string" }

// shardValue is the --shard option: "I/N", rank I of N (splits.ParseShard), or "" for the
// whole of every epoch; it leaves the shard's Pad (--shard-pad) as it is.
type shardValue splits.Shard

func (v *shardValue) Set(s string) error {
	var sh splits.Shard
	if s != "" {
		var err error
		if sh, err = splits.ParseShard(s); err != nil {
			return err
		}
	}
	sh.Pad = v.Pad
	*v = shardValue(sh)
	return nil
}

func (v *shardValue) String() string {
	if v.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", v.Rank, v.Count)
}

func (v *shardValue) Type() string { return "string" }

// OptionsList is the options as the documentation lists them, in Markdown: a table of
// each option's name, default, whether a volume attribute may set it, and help.
func OptionsList() string {
	var b strings.Builder
	b.WriteString("| option | default | volume attribute | what it does |\n| --- | --- | --- | --- |\n")
	for _, oi := range OptionsInfo {
		def := oi.Default()
		if def != "" {
			def = "`" + def + "`"
		}
		attr := "yes"
		if !oi.Attribute {
			attr = "no"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", oi.Name, def, attr, strings.ReplaceAll(oi.Help, "|", `\|`))
	}
	return b.String()
}
