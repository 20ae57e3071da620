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

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/plain`:         "/mnt/plain",
		`/mnt/with\040space`: "/mnt/with space",
		`/mnt/tab\011x`:      "/mnt/tab\tx",
		`/mnt/back\134slash`: `/mnt/back\slash`,
		`/mnt/not\08escape`:  `/mnt/not\08escape`,
		`/mnt/trailing\04`:   `/mnt/trailing\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	if exitCode(usageError{errors.New("x")}) != 2 || exitCode(errors.New("x")) != 1 {
		t.Error("usage errors exit 2, other errors 1")
	}
}
