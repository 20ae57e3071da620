package cassandra

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseHosts reads comma-separated contact points (host or host:port), blanks skipped.
func ParseHosts(s string) []string {
	var hosts []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// ParseAddressMap reads entries FROM=TO, each an IP:port, into Config.AddressMap.
func ParseAddressMap(entries []string) (map[string]string, error) {
	amap := map[string]string{}
	for _, m := range entries {
		from, to, ok := strings.Cut(m, "=")
		if !ok || !validHostPort(from) || !validHostPort(to) {
			return nil, fmt.Errorf("%q: want FROM=TO with IP:port each, e.g. 10.0.0.5:9042=127.0.0.1:19042", m)
		}
		amap[from] = to
	}
	return amap, nil
}

func validHostPort(s string) bool {
	h, p, err := net.SplitHostPort(s)
	if err != nil || net.ParseIP(h) == nil {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}
