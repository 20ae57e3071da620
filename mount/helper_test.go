package mount

import (
	"strings"
	"testing"
)

func TestHelperArgs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"tiles", "/mnt/t", "-o", "rw,noauto,_netdev,x-systemd.automount,hosts=10.0.0.5:9042,cache_size=4GiB,allow_other,seed=7"},
			"mount --daemon --dataset tiles --hosts=10.0.0.5:9042 --cache-size=4GiB --allow-other --seed=7 /mnt/t"},
		{[]string{"-n", "cassfs#tiles", "/mnt/t", "-oconfig=/etc/cassfs/tiles.yaml"}, "mount --daemon --dataset tiles --config=/etc/cassfs/tiles.yaml /mnt/t"},
		{[]string{"tiles", "/mnt/t"}, "mount --daemon --dataset tiles /mnt/t"},
	} {
		got, err := HelperArgs(tc.in)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("HelperArgs(%q) = %q, %v; want %q", tc.in, strings.Join(got, " "), err, tc.want)
		}
	}
	for _, bad := range [][]string{{"tiles"}, {"tiles", "/mnt", "extra"}, {"tiles", "/mnt", "-o"}, {"tiles", "/mnt", "-x"}} {
		if _, err := HelperArgs(bad); err == nil {
			t.Errorf("HelperArgs(%q) accepted", bad)
		}
	}
}
