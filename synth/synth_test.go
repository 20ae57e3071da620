package synth

import (
	"bytes"
	"context"
	"encoding/csv"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
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
