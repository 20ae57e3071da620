package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"image"
	_ "image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestGenerateDecodableDeterministic(t *testing.T) {
	gen := func() string {
		out := t.TempDir()
		if err := Generate(context.Background(), Options{Out: out, Count: 60, Classes: 3, MeanSize: 20_000, PNGFraction: 0.2, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := gen(), gen()
	root, csvPath := Layout(a)
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(recs[0], ","); got != "path,patient_id,slide,x,y" {
		t.Errorf("CSV header %q", got)
	}
	if len(recs) != 61 {
		t.Fatalf("CSV has %d rows, want 60", len(recs)-1)
	}
	var total, pngs int
	for _, r := range recs[1:] {
		data, err := os.ReadFile(filepath.Join(root, r[0]))
		if err != nil {
			t.Fatal(err)
		}
		other, err := os.ReadFile(filepath.Join(b, "images", r[0]))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, other) {
			t.Errorf("%s differs between two runs with the same seed", r[0])
		}
		_, format, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s does not decode: %v", r[0], err)
		}
		if want := strings.TrimPrefix(filepath.Ext(r[0]), "."); format != map[string]string{"jpg": "jpeg", "png": "png"}[want] {
			t.Errorf("%s decodes as %s", r[0], format)
		}
		if format == "png" {
			pngs++
		}
		total += len(data)
	}
	if mean := total / 60; mean < 14_000 || mean > 26_000 {
		t.Errorf("mean size %d, want within 30%% of 20000", mean)
	}
	if pngs == 0 || pngs == 60 {
		t.Errorf("%d of 60 are PNG, want a mix", pngs)
	}
}

// With Masks every image has a decodable PNG mask at its path with .png, whose first row is
// the image's SHA-256 and whose other rows are its class.
func TestMasks(t *testing.T) {
	out := t.TempDir()
	if err := Generate(context.Background(), Options{Out: out, Count: 12, Classes: 3, MeanSize: 3000, PNGFraction: 0.3, Masks: true}); err != nil {
		t.Fatal(err)
	}
	root, _ := Layout(out)
	n := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(MaskRoot(out), strings.TrimSuffix(rel, filepath.Ext(rel))+".png"))
		if err != nil {
			return err
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			return err
		}
		g := img.(*image.Gray)
		sum := sha256.Sum256(data)
		class, err := strconv.Atoi(strings.TrimPrefix(filepath.Dir(rel), "class_"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g.Pix[:32], sum[:]) || g.Pix[g.PixOffset(5, 2)] != uint8(class) {
			t.Errorf("%s: mask does not encode the image's checksum and class", rel)
		}
		n++
		return nil
	})
	if err != nil || n != 12 {
		t.Fatalf("%d images with masks: %v", n, err)
	}
}

// TestEveryClassHasAnImage: with at least as many images as classes, no class directory is
// left empty, however few images per class the draw gives (1,500 in 1,000 classes left 439
// empty); the imbalance stays; fewer images than classes is refused with the reason.
func TestEveryClassHasAnImage(t *testing.T) {
	for _, tc := range []struct{ count, classes int }{{1500, 1000}, {1000, 1000}, {7, 3}, {20000, 10}} {
		o := Options{Count: tc.count, Classes: tc.classes, MeanSize: 2000, Seed: 1}
		o.Patients = max(o.Count/25, o.Classes)
		per := make([]int, tc.classes)
		for _, it := range plan(o) {
			per[it.class]++
			if !strings.HasPrefix(it.rel, ClassName(it.class)+"/") {
				t.Errorf("%d in %d: %s is not under its class %s", tc.count, tc.classes, it.rel, ClassName(it.class))
			}
		}
		for c, n := range per {
			if n == 0 {
				t.Errorf("%d images in %d classes: class %d is empty", tc.count, tc.classes, c)
			}
		}
		if tc.count >= 100*tc.classes && per[tc.classes-1] < 5*per[0] {
			t.Errorf("%d images in %d classes: class %d has %d, class 0 %d: the imbalance is gone", tc.count, tc.classes, tc.classes-1, per[tc.classes-1], per[0])
		}
	}
	err := Generate(context.Background(), Options{Out: t.TempDir(), Count: 5, Classes: 10})
	if err == nil || !strings.Contains(err.Error(), "count 5 is smaller than classes 10") {
		t.Errorf("5 images in 10 classes: %v, want a refusal saying why", err)
	}
}

// TestWorkerStopsAtFirstError: an image that cannot be written ends the run with an error
// naming it; its worker (the only one here) takes no image after it, the progress counts
// the images before it, and no CSV is written for a tree that is not whole.
func TestWorkerStopsAtFirstError(t *testing.T) {
	out := t.TempDir()
	o := Options{Out: out, Count: 12, Classes: 3, MeanSize: 3000, Patients: 3, Workers: 1, Seed: 2}
	items := plan(o)
	root, csvPath := Layout(out)
	const bad = 5
	// A directory where the image goes: writing it fails.
	if err := os.MkdirAll(filepath.Join(root, items[bad].rel), 0o755); err != nil {
		t.Fatal(err)
	}
	var progressed []int
	o.Progress = func(i int) { progressed = append(progressed, i) }
	err := Generate(context.Background(), o)
	if err == nil || !strings.HasPrefix(err.Error(), "generate "+items[bad].rel+": ") {
		t.Fatalf("error = %v, want one naming %s", err, items[bad].rel)
	}
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(progressed, want) {
		t.Errorf("progress reported %v, want %v", progressed, want)
	}
	for i, it := range items {
		_, err := os.Stat(filepath.Join(root, it.rel))
		if written := err == nil; i != bad && written != (i < bad) {
			t.Errorf("image %d (%s) written: %v, want %v", i, it.rel, written, i < bad)
		}
	}
	if _, err := os.Stat(csvPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CSV of a failed run: %v, want none", err)
	}
}

// TestFirstErrorStopsEveryWorker: once one worker fails, the others take no more images.
func TestFirstErrorStopsEveryWorker(t *testing.T) {
	out := t.TempDir()
	o := Options{Out: out, Count: 400, Classes: 3, MeanSize: 3000, Patients: 3, Workers: 2, Seed: 2}
	items := plan(o)
	root, _ := Layout(out)
	if err := os.MkdirAll(filepath.Join(root, items[5].rel), 0o755); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	o.Progress = func(int) { done.Add(1) }
	if err := Generate(context.Background(), o); err == nil {
		t.Fatal("a failed image did not fail the run")
	}
	if n := done.Load(); n > 100 {
		t.Errorf("%d of 400 images generated after one failed at the 6th: the other worker went on", n)
	}
}
