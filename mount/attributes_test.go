package mount

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/view"
)

// TestVolumeFromAttributes: attributes set what their flags set; a bad one is an
// *OptionError naming it; unknown ones are refused by name, Kubernetes' own ignored.
func TestVolumeFromAttributes(t *testing.T) {
	v, err := VolumeFromAttributes(map[string]string{
		"dataset": "tiles", "hosts": "10.0.0.5,10.0.0.6:9042", "seed": "7", "order": "strict",
		"shard": "1/4", "shard-pad": "true", "cache-size": "2GiB", "cache-dir": "/var/cache/cassfs",
		"cache-dir-size": "10GiB", "prefetch": "100", "push": "false", "speculative-after": "250ms",
		"csi.storage.k8s.io/pod.name": "trainer-0",
	})
	if err != nil {
		t.Fatal(err)
	}
	o := v.Options
	if v.Dataset != "tiles" || v.Hosts != "10.0.0.5,10.0.0.6:9042" || o.Seed != 7 || o.Order != view.Strict ||
		o.Shard.Rank != 1 || o.Shard.Count != 4 || !o.Shard.Pad || o.CacheBytes != 2<<30 || o.CacheDir != "/var/cache/cassfs" ||
		o.CacheDirBytes != 10<<30 || o.Prefetch != 100 || o.Push || o.HedgeAfter != 250*time.Millisecond || !o.AllowOther ||
		o.EpochViews != Defaults().EpochViews {
		t.Errorf("got %+v", v)
	}

	for _, tc := range []struct {
		attrs map[string]string
		want  string // in the error, naming the attribute
	}{
		{map[string]string{}, `"dataset" missing`},
		{map[string]string{"seed": "7"}, `"dataset" missing`},
		{map[string]string{"dataset": "Tiles!"}, `"dataset"`},
		{map[string]string{"dataset": "tiles", "seed": "-1"}, `"seed"`},
		{map[string]string{"dataset": "tiles", "order": "random"}, `"order"`},
		{map[string]string{"dataset": "tiles", "shard": "4/4"}, `"shard"`},
		{map[string]string{"dataset": "tiles", "cache-size": "lots"}, `"cache-size"`},
		{map[string]string{"dataset": "tiles", "cache-size": "0"}, "cache-size must be positive"},
		{map[string]string{"dataset": "tiles", "cache-dir": "/c"}, "cache-dir needs cache-dir-size"},
		{map[string]string{"dataset": "tiles", "prefetch": "many"}, `"prefetch"`},
		{map[string]string{"dataset": "tiles", "speculative-after": "soon"}, `"speculative-after"`},
		{map[string]string{"dataset": "tiles", "sede": "7", "cache": "1"}, `"cache", "sede" unknown`},
	} {
		_, err := VolumeFromAttributes(tc.attrs)
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an *OptionError saying %s", tc.attrs, err, tc.want)
		}
	}
}
