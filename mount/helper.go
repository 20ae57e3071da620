package mount

import (
	"errors"
	"fmt"
	"strings"
)

// HelperArgs turns the arguments mount(8) gives a mount helper (/sbin/mount.cassfs, for
// fstab and systemd) — SOURCE DIR [-s] [-f] [-n]
// [-v] [-o OPTIONS] — into those of cassfs mount --daemon. SOURCE is the dataset; each
// option key=value becomes --key=value (underscores as dashes) and each bare key --key,
// except the generic mount options, which mean nothing to cassfs (it is always read-only).
func HelperArgs(args []string) ([]string, error) {
	var pos, opts []string
	for k := 0; k < len(args); k++ {
		switch a := args[k]; {
		case a == "-o":
			if k+1 == len(args) {
				return nil, errors.New("-o without options")
			}
			opts = append(opts, strings.Split(args[k+1], ",")...)
			k++
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, strings.Split(a[2:], ",")...)
		case a == "-s" || a == "-f" || a == "-n" || a == "-v":
			// sloppy, fake, no mtab, verbose: nothing to do
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("unknown mount option %s", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("want DATASET MOUNTPOINT [-o options], got %q", args)
	}
	out := []string{"mount", "--daemon", "--dataset", strings.TrimPrefix(pos[0], "cassfs#")}
	for _, o := range opts {
		key, value, hasValue := strings.Cut(strings.TrimSpace(o), "=")
		if key == "" || genericMountOption(key) {
			continue
		}
		flag := "--" + strings.ReplaceAll(key, "_", "-")
		if hasValue {
			flag += "=" + value
		}
		out = append(out, flag)
	}
	return append(out, pos[1]), nil
}

func genericMountOption(key string) bool {
	switch key {
	case "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "nofail", "_netdev",
		"ro", "rw", "exec", "noexec", "suid", "nosuid", "dev", "nodev", "sync", "async",
		"atime", "noatime", "relatime", "strictatime", "nodiratime", "comment":
		return true
	}
	return strings.HasPrefix(key, "x-")
}
