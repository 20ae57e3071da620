package disktier

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// statsFile keeps the hits and misses of the mounts that used a dataset's directory.
const statsFile = ".stats"

// Usage is what a directory holds for one dataset, read without opening it (cassfs
// cache show): entries, bytes, whether a mount holds it, and the hits and misses of the
// mounts that used it.
type Usage struct {
	Dataset      string
	Entries      int
	Bytes        int64
	InUse        bool
	Hits, Misses int64
}

// ReadUsage reports every dataset held in the cache directory dir.
func ReadUsage(dir string) ([]Usage, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache directory %s: %w", dir, err)
	}
	var out []Usage
	for _, de := range des {
		root := filepath.Join(dir, de.Name())
		if !de.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, ".lock")); err != nil {
			continue // not a dataset's directory
		}
		u := Usage{Dataset: de.Name()}
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && len(e.Name()) == 36+1+16 && e.Name()[36] == '-' {
				info, err := e.Info()
				if errors.Is(err, fs.ErrNotExist) {
					return nil // evicted by a mount meanwhile
				}
				if err != nil {
					return err
				}
				u.Entries++
				u.Bytes += info.Size()
			}
			return nil
		})
		if err != nil {
			// Counts of part of a directory would be wrong counts.
			return nil, fmt.Errorf("cache directory %s: dataset %s could not be read: %w", dir, de.Name(), err)
		}
		if f, err := os.Open(filepath.Join(root, ".lock")); err == nil {
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
				u.InUse = true
			}
			f.Close()
		}
		var st Stats
		b, err := os.ReadFile(filepath.Join(root, statsFile))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		switch {
		case err == nil:
			u.Hits, u.Misses = st.Hits, st.Misses
		case errors.Is(err, fs.ErrNotExist):
			// No mount has used the directory yet: no hits and no misses.
		default:
			return nil, fmt.Errorf("cache directory %s: dataset %s: the mounts' hit counts (%s) could not be read: %w", dir, de.Name(), statsFile, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Remove removes dataset ds's entries from the cache directory dir, unless a mount
// uses them.
func Remove(dir, ds string) error {
	root := filepath.Join(dir, ds)
	f, err := os.Open(filepath.Join(root, ".lock"))
	if err != nil {
		return fmt.Errorf("cache directory %s holds nothing of dataset %s", dir, ds)
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return fmt.Errorf("cache directory %s: dataset %s is in use by a mount; unmount it first", dir, ds)
	}
	return os.RemoveAll(root)
}
