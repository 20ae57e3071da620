package mount

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cassfs/cassfs/splits"
	"github.com/cassfs/cassfs/store"
	"github.com/dustin/go-humanize"
)

// Volume is what a volume's attributes (a CSI volume context: a PersistentVolume's
// volumeAttributes or a StorageClass's parameters) say: which dataset, where its database
// is, and how to mount it.
type Volume struct {
	Dataset string
	// Hosts is the database's contact points, comma-separated as --hosts takes them;
	// empty: the serving daemon's own.
	Hosts   string
	Options Options
}

// attributes are the attributes a volume may have, each named as the `cassfs mount` flag
// it stands for, and how each sets a Volume.
var attributes = map[string]func(v *Volume, s string) error{
	"dataset": func(v *Volume, s string) error { v.Dataset = s; return store.ValidDatasetName(s) },
	"hosts":   func(v *Volume, s string) error { v.Hosts = s; return nil },
	"seed": func(v *Volume, s string) (err error) {
		v.Options.Seed, err = strconv.ParseUint(s, 10, 64)
		return err
	},
	"splits": func(v *Volume, s string) error { v.Options.Splits = s; return nil },
	"order":  func(v *Volume, s string) error { return v.Options.Order.Set(s) },
	"shard": func(v *Volume, s string) (err error) {
		pad := v.Options.Shard.Pad
		v.Options.Shard, err = splits.ParseShard(s)
		v.Options.Shard.Pad = pad
		return err
	},
	"shard-pad":          func(v *Volume, s string) (err error) { v.Options.Shard.Pad, err = strconv.ParseBool(s); return err },
	"push":               func(v *Volume, s string) (err error) { v.Options.Push, err = strconv.ParseBool(s); return err },
	"scan-index":         func(v *Volume, s string) (err error) { v.Options.ScanIndex, err = strconv.ParseBool(s); return err },
	"cache-dir":          func(v *Volume, s string) error { v.Options.CacheDir = s; return nil },
	"epochs-listed":      intAttribute(func(o *Options) *int { return &o.EpochsListed }),
	"epoch-views":        intAttribute(func(o *Options) *int { return &o.EpochViews }),
	"prefetch":           intAttribute(func(o *Options) *int { return &o.Prefetch }),
	"prefetch-in-flight": intAttribute(func(o *Options) *int { return &o.PrefetchInFlight }),
	"max-background":     intAttribute(func(o *Options) *int { return &o.MaxBackground }),
	"look-ahead":         intAttribute(func(o *Options) *int { return &o.LookAhead }),
	"cache-size": func(v *Volume, s string) (err error) {
		v.Options.CacheBytes, err = humanize.ParseBytes(s)
		return err
	},
	"cache-dir-size": func(v *Volume, s string) error {
		n, err := humanize.ParseBytes(s)
		if err == nil && n > 1<<62 {
			err = errors.New("too large")
		}
		v.Options.CacheDirBytes = int64(n)
		return err
	},
	"speculative-after": func(v *Volume, s string) (err error) {
		v.Options.HedgeAfter, err = time.ParseDuration(s)
		return err
	},
}

func intAttribute(field func(*Options) *int) func(v *Volume, s string) error {
	return func(v *Volume, s string) (err error) {
		*field(&v.Options), err = strconv.Atoi(s)
		return err
	}
}

// Attributes lists the attributes VolumeFromAttributes takes, sorted.
func Attributes() []string { return slices.Sorted(maps.Keys(attributes)) }

// VolumeFromAttributes reads a volume's attributes: "dataset" (required) and any of
// Attributes(), each named and written as the `cassfs mount` flag of that name takes it
// ("seed": "7", "cache-size": "4GiB", "order": "strict", "shard": "0/4"...); the
// options no attribute sets are Defaults(), except that other users may read the mount
// (pods run as any user). Keys with a "/" are Kubernetes' own (such as
// csi.storage.k8s.io/pod.name, with podInfoOnMount) and are ignored. An error is an
// *OptionError that names the attribute: one missing, unknown, not parsed or out of its
// range.
func VolumeFromAttributes(attrs map[string]string) (Volume, error) {
	v := Volume{Options: Defaults()}
	v.Options.AllowOther = true
	bad := func(format string, a ...any) (Volume, error) {
		return Volume{}, &OptionError{fmt.Errorf("volume attribute "+format, a...)}
	}
	var unknown []string
	for _, key := range slices.Sorted(maps.Keys(attrs)) {
		set, ok := attributes[key]
		switch {
		case strings.Contains(key, "/"):
		case !ok:
			unknown = append(unknown, fmt.Sprintf("%q", key))
		default:
			if err := set(&v, attrs[key]); err != nil {
				return bad("%q: value %q: %v", key, attrs[key], err)
			}
		}
	}
	if len(unknown) > 0 {
		return bad("%s unknown (known: %s)", strings.Join(unknown, ", "), strings.Join(Attributes(), ", "))
	}
	if _, ok := attrs["dataset"]; !ok {
		return bad("\"dataset\" missing: which dataset to mount")
	}
	if err := v.Options.Check(); err != nil {
		// Check names flags: an attribute is named as its flag, without the dashes.
		return bad("%s", strings.ReplaceAll(err.Error(), "--", ""))
	}
	return v, nil
}
