package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"image"
	_ "image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	f, _ := os.Open(csvPath)
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
		other, _ := os.ReadFile(filepath.Join(b, "images", r[0]))
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
		rel, _ := filepath.Rel(root, p)
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
		class, _ := strconv.Atoi(strings.TrimPrefix(filepath.Dir(rel), "class_"))
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
