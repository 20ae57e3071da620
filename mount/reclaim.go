package mount

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"
)

// damonAdmin is the kernel's DAMON sysfs interface.
const damonAdmin = "/sys/kernel/mm/damon/admin"

// ProactivePageout reports whether this machine's kernel runs a DAMON scheme that pages out
// memory it finds cold (see proactivePageout).
func ProactivePageout() bool { return proactivePageout(damonAdmin) }

// proactivePageout reports whether the kernel runs a DAMON scheme that pages out memory it
// finds cold (the DAMON sysfs interface under admin: a kdamond "on" with a scheme whose
// action is "pageout"). Such a scheme takes file pages read once an epoch, a few at a
// time, while memory is plentiful; anything it cannot read counts as none.
func proactivePageout(admin string) bool {
	states, _ := filepath.Glob(filepath.Join(admin, "kdamonds", "*", "state"))
	for _, st := range states {
		if state, err := os.ReadFile(st); err != nil || strings.TrimSpace(string(state)) != "on" {
			continue
		}
		actions, _ := filepath.Glob(filepath.Join(filepath.Dir(st), "contexts", "*", "schemes", "*", "action"))
		for _, a := range actions {
			if action, err := os.ReadFile(a); err == nil && strings.TrimSpace(string(action)) == "pageout" {
				return true
			}
		}
	}
	return false
}

// reclaimHint says, once at mount, where the kernel's proactive pageout will cost a dataset
// that --cache-size does not hold database fetches in later epochs: pushed pages the
// pageout takes are fetched again (bench/history/journal.md, "what a lost page costs the
// mount"), where a disk tier would serve them from local disk.
func reclaimHint(o Options, datasetBytes int64, admin string, log *slog.Logger) {
	if !o.Push || o.CacheDir != "" || uint64(datasetBytes) <= o.CacheBytes || !proactivePageout(admin) {
		return
	}
	log.Info("the kernel pages out file data it finds cold (DAMON pageout): files of this dataset it takes from the page cache are fetched again from the database in later epochs, --cache-size not holding them; --cache-dir on local disk would serve them from there",
		"dataset", humanize.IBytes(uint64(datasetBytes)), "cache_size", humanize.IBytes(o.CacheBytes))
}
