package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDBFlagsConfig(t *testing.T) {
	ok := dbFlags{hosts: "10.0.0.1, 10.0.0.2:9043", dataset: "tiles", timeout: time.Second, maxInFlight: 8, conns: 2,
		addressMap: []string{"10.0.0.1:9042=127.0.0.1:19042"}}
	cfg, err := ok.config()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Hosts, ",") != "10.0.0.1,10.0.0.2:9043" || cfg.AddressMap["10.0.0.1:9042"] != "127.0.0.1:19042" {
		t.Errorf("config = %+v", cfg)
	}
	for _, tc := range []struct {
		mod  func(*dbFlags)
		want string
	}{
		{func(f *dbFlags) { f.dataset = "" }, "--dataset is required"},
		{func(f *dbFlags) { f.dataset = "Bad" }, "invalid dataset name"},
		{func(f *dbFlags) { f.hosts = " , " }, "--hosts is empty"},
		{func(f *dbFlags) { f.timeout = 0 }, "--timeout must be positive"},
		{func(f *dbFlags) { f.maxInFlight = 0 }, "--max-in-flight"},
		{func(f *dbFlags) { f.conns = 0 }, "--conns-per-host"},
		{func(f *dbFlags) { f.addressMap = []string{"10.0.0.1:9042"} }, "want FROM=TO"},
		{func(f *dbFlags) { f.addressMap = []string{"host:9042=127.0.0.1:1"} }, "want FROM=TO"},
		{func(f *dbFlags) { f.addressMap = []string{"10.0.0.1:9042=127.0.0.1:99999"} }, "want FROM=TO"},
	} {
		f := ok
		tc.mod(&f)
		_, err := f.config()
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config(): %v, want a usage error containing %q", err, tc.want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	if exitCode(usageError{errors.New("x")}) != 2 || exitCode(errors.New("x")) != 1 {
		t.Error("usage errors exit 2, other errors 1")
	}
}

// TestObjectArg: the object of dataset show, dataset delete and the cache commands is their
// one argument or the flag of the older form; both at once must agree.
func TestObjectArg(t *testing.T) {
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out strings.Builder
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"cache", "show", dir}, {"cache", "show", "--cache-dir", dir}, {"cache", "show", "--cache-dir", dir, dir}} {
		out, err := run(args...)
		if err != nil || !strings.Contains(out, "cache directory "+dir+" holds no dataset") {
			t.Errorf("cassfs %q: %v\n%s", args, err, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dataset", "show", "a", "--dataset", "b"}, `dataset show: dataset NAME "a" and --dataset "b" differ`},
		{[]string{"dataset", "delete", "a", "b"}, "dataset delete takes one dataset NAME, got 2 arguments"},
		{[]string{"cache", "show", dir, "--cache-dir", dir + "x"}, "differ"},
		{[]string{"cache", "show"}, "cache show needs the cache directory"},
		{[]string{"cache", "clear", dir}, "needs the cache directory and --dataset"},
	} {
		_, err := run(tc.args...)
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cassfs %q: %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestMountRefusesANegativeLookAhead: a bad --look-ahead is a usage error before anything
// is connected or mounted.
func TestMountRefusesANegativeLookAhead(t *testing.T) {
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"mount", "--dataset", "x", "--look-ahead", "-1", t.TempDir()})
	err := root.Execute()
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "--look-ahead must be >= 0") {
		t.Errorf("cassfs mount --look-ahead -1: %v, want a usage error about --look-ahead", err)
	}
}
