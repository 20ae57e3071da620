package mount

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/store"
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

// attributes are the attributes a volume may have and how each sets a Volume: the
// dataset, the database's contact points, and the options of OptionsInfo a volume may set,
// each named as the `cassfs mount` flag it stands for and parsed as the flag parses it.
var attributes = func() map[string]func(v *Volume, s string) error {
	m := map[string]func(v *Volume, s string) error{
		"dataset": func(v *Volume, s string) error { v.Dataset = s; return store.ValidDatasetName(s) },
		"hosts":   func(v *Volume, s string) error { v.Hosts = s; return nil },
	}
	for _, oi := range OptionsInfo {
		if oi.Attribute {
			m[oi.Name] = func(v *Volume, s string) error { return oi.value(&v.Options).Set(s) }
		}
	}
	return m
}()

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
