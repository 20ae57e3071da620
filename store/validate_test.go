package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestCheckPut(t *testing.T) {
	data := []byte("image bytes")
	good := Sample{ID: uuid.New(), Name: "a/1.jpg", Size: int64(len(data)), Checksum: Checksum(data), CRC32C: CRC32C(data), HasCRC32C: true}
	if err := CheckPut(good, data, nil); err != nil {
		t.Fatalf("CheckPut(good) = %v", err)
	}
	noCRC := good
	noCRC.CRC32C, noCRC.HasCRC32C = 12345, false // not set: not checked
	if err := CheckPut(noCRC, data, nil); err != nil {
		t.Errorf("CheckPut without a CRC32C = %v", err)
	}
	for what, mutate := range map[string]func(*Sample){
		"size":     func(s *Sample) { s.Size++ },
		"checksum": func(s *Sample) { s.Checksum[31] ^= 1 },
		"CRC32C":   func(s *Sample) { s.CRC32C ^= 1 << 31 },
	} {
		bad := good
		mutate(&bad)
		if err := CheckPut(bad, data, nil); err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), "a/1.jpg") {
			t.Errorf("CheckPut with a wrong %s = %v, want an error naming it and the sample", what, err)
		}
	}
}

// A target must come with its data and be described by it, with a usable extension.
func TestCheckPutTarget(t *testing.T) {
	data, mask := []byte("image bytes"), []byte("mask bytes")
	good := Sample{ID: uuid.New(), Name: "a/1.jpg", Size: int64(len(data)), Checksum: Checksum(data),
		Target: &Target{Ext: ".png", Size: int64(len(mask)), Checksum: Checksum(mask), CRC32C: CRC32C(mask)}}
	if err := CheckPut(good, data, mask); err != nil {
		t.Fatalf("CheckPut(good) = %v", err)
	}
	if err := CheckPut(good, data, nil); err == nil || !strings.Contains(err.Error(), "without its data") {
		t.Errorf("a Target without data: %v", err)
	}
	noTarget := good
	noTarget.Target = nil
	if err := CheckPut(noTarget, data, mask); err == nil || !strings.Contains(err.Error(), "without a Target") {
		t.Errorf("target data without a Target: %v", err)
	}
	for what, mutate := range map[string]func(*Target){
		"size":      func(t *Target) { t.Size++ },
		"checksum":  func(t *Target) { t.Checksum[0] ^= 1 },
		"CRC32C":    func(t *Target) { t.CRC32C ^= 1 },
		"extension": func(t *Target) { t.Ext = "png" },
		"ext slash": func(t *Target) { t.Ext = "./png" },
		"ext long":  func(t *Target) { t.Ext = "." + strings.Repeat("x", MaxTargetExt) },
	} {
		bad := good
		tg := *good.Target
		mutate(&tg)
		bad.Target = &tg
		if err := CheckPut(bad, data, mask); err == nil || !strings.Contains(err.Error(), "a/1.jpg") {
			t.Errorf("CheckPut with a wrong target %s = %v, want an error naming the sample", what, err)
		}
	}
	for _, ext := range []string{".png", ".npy", ".json", ".nii.gz", ".tar-1"} {
		if err := ValidTargetExt(ext); err != nil {
			t.Errorf("ValidTargetExt(%q) = %v", ext, err)
		}
	}
}

func TestCheckSplits(t *testing.T) {
	long := strings.Repeat("x", MaxSplitName)
	if err := CheckSplits([]NewSplit{{Name: "train"}, {Name: long}}); err != nil {
		t.Errorf("CheckSplits(valid) = %v", err)
	}
	for _, bad := range [][]NewSplit{
		nil,
		{{Name: ""}},
		{{Name: long + "x"}},
		{{Name: "a"}, {Name: "b"}, {Name: "a"}},
	} {
		if err := CheckSplits(bad); err == nil {
			t.Errorf("CheckSplits(%d splits) accepted %v", len(bad), bad)
		}
	}
}

func TestCRC32C(t *testing.T) {
	// The Castagnoli check value (RFC 3720, B.4): CRC32C("123456789") = 0xE3069283.
	if got := CRC32C([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("CRC32C(123456789) = %08x, want e3069283", got)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestErrorKind(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("get sample x: %w", err) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrap(ErrCorrupt), KindCorrupt},
		{wrap(ErrNotFound), KindMissing},
		{wrap(context.Canceled), KindCanceled},
		{wrap(context.DeadlineExceeded), KindTimeout},
		{wrap(timeoutErr{}), KindTimeout},
		{wrap(&KindError{Kind: ErrTimeout, Err: errors.New("driver timeout")}), KindTimeout},
		{wrap(&KindError{Kind: ErrUnavailable, Err: errors.New("no hosts")}), KindUnavailable},
		{errors.New("boom"), KindOther},
		// A corrupt blob is corrupt even when it also timed out afterwards.
		{errors.Join(ErrCorrupt, context.DeadlineExceeded), KindCorrupt},
	} {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	k := &KindError{Kind: ErrUnavailable, Err: errors.New("no hosts in the pool")}
	if k.Error() != "no hosts in the pool" || !errors.Is(k, ErrUnavailable) {
		t.Errorf("KindError %q: keeps the driver's message and is its kind", k.Error())
	}
	if len(Kinds) != 6 {
		t.Errorf("Kinds lists %d kinds, want 6", len(Kinds))
	}
}

func TestSameMeta(t *testing.T) {
	for _, tc := range []struct {
		a, b map[string]string
		want bool
	}{
		{nil, nil, true},
		{map[string]string{"p": "1"}, map[string]string{"p": "1"}, true},
		{map[string]string{"p": "1", "s": ""}, map[string]string{"p": "1"}, true},
		{nil, map[string]string{"s": ""}, true},
		{map[string]string{"p": "1"}, map[string]string{"p": "2"}, false},
		{map[string]string{"p": "1"}, nil, false},
		{nil, map[string]string{"p": "1"}, false},
	} {
		if got := SameMeta(tc.a, tc.b); got != tc.want {
			t.Errorf("SameMeta(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
