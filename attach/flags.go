package attach

import (
	"errors"

	"github.com/spf13/pflag"
)

// Flags are the command line of cassfs dataset attach that makes Options: the tables, the
// columns named, the split lists and the bounds on reading.
type Flags struct {
	data, meta, lists []string
	cols              Columns
	metaCols          MetaColumns
	maxSize           int64
	workers           int
	rateMB            float64
	// Replication is the replication factor of the catalogue's keyspace when it is made.
	Replication int
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.data, "data-table", nil, "[SPLIT=]KEYSPACE.TABLE holding the images (uuid partition key, blob column); repeatable")
	fs.StringArrayVar(&f.meta, "metadata-table", nil, "[SPLIT=]KEYSPACE.TABLE of metadata joined on the id; repeatable")
	fs.StringVar(&f.cols.ID, "id-column", "", "the data tables' uuid partition key (default: found)")
	fs.StringVar(&f.cols.Data, "data-column", "", "the data tables' blob column holding the image (default: the only blob column)")
	fs.StringVar(&f.cols.Label, "label-column", "", "the int column holding the label, in the data and metadata tables (default: label, if there is one)")
	fs.BoolVar(&f.cols.NoLabel, "no-label", false, "ignore the data tables' label column: one class")
	fs.StringVar(&f.cols.Name, "name-column", "", "text column (data or metadata table) holding each file's name, e.g. filename (default: <uuid>.<format's extension>)")
	fs.StringVar(&f.metaCols.Class, "class-column", "", "metadata text column naming the classes, one value per label (default: found, e.g. or_label; else class_<label>)")
	fs.StringVar(&f.metaCols.ID, "metadata-id-column", "", "the metadata tables' uuid column holding the data tables' ids (default: found)")
	fs.StringArrayVar(&f.lists, "split-list", nil, "SPLIT=FILE: a split given as sample ids, one uuid a line; repeatable")
	fs.Int64Var(&f.maxSize, "max-size", 15<<20, "largest blob accepted, in bytes")
	fs.IntVar(&f.workers, "workers", 16, "blobs read at once")
	fs.IntVar(&f.Replication, "replication", 1, "replication factor of the catalogue's keyspace when it is made (SimpleStrategy)")
	fs.Float64Var(&f.rateMB, "rate", 0, "most MB/s of blobs read (0: no limit), to spare a cluster in use")
}

// Options checks the flags and makes the Options they give (reading the split lists).
func (f *Flags) Options() (Options, error) {
	if f.maxSize <= 0 || f.workers <= 0 || f.Replication <= 0 || f.rateMB < 0 {
		return Options{}, errors.New("--max-size, --workers and --replication must be positive, --rate not negative")
	}
	o := Options{Columns: f.cols, MetaColumns: f.metaCols, MaxSize: f.maxSize, Workers: f.workers, Rate: int64(f.rateMB * 1e6)}
	return o, o.Parse(f.data, f.meta, f.lists)
}
