// Package synth generates synthetic image datasets for tests, the demo and benchmarks: an
// ImageFolder tree of real, decodable JPEG (and some PNG) files plus a metadata CSV with
// entity columns, like a digital-pathology tile dataset (patient, slide, tile coordinates).
// It writes files only: it must not know the store, the mount or the database.
//
// Everything is a pure function of the options and the seed, so two runs produce the same
// bytes. File sizes scatter around the requested mean (±50%): the image dimensions are
// chosen from a bytes-per-pixel figure measured once per run on a probe image of the same
// kind of content, so the mean lands near the target without encoding twice.
package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Options describe the dataset to generate.
type Options struct {
	Out         string  // directory; images go to Out/images/<class>/, metadata to Out/metadata.csv
	Count       int     // number of images
	Classes     int     // number of classes (default 4)
	MeanSize    int     // mean file size in bytes (default 110,000, like ImageNet)
	PNGFraction float64 // share of PNG files, 0 to 1
	Patients    int     // number of patients (default Count/25, at least Classes)
	// Masks also writes a segmentation-style target per image: Out/masks/<class>/<stem>.png
	// (MaskFor).
	Masks    bool
	Seed     uint64
	Workers  int         // default 2
	Progress func(n int) // called after each image, from several goroutines
}

// Layout returns the image root and the CSV path for out.
func Layout(out string) (root, csvPath string) {
	return filepath.Join(out, "images"), filepath.Join(out, "metadata.csv")
}

// MaskRoot is where Masks go for out.
func MaskRoot(out string) string { return filepath.Join(out, "masks") }

// MaskFor is the mask of an image of class c: a 32×4 8-bit grayscale PNG whose first row is
// the SHA-256 of the image's bytes and whose other rows are c, so a reader can check, from
// the decoded mask alone, that it was given the right image's mask.
func MaskFor(imageBytes []byte, c int) ([]byte, error) {
	sum := sha256.Sum256(imageBytes)
	img := image.NewGray(image.Rect(0, 0, len(sum), 4))
	for x, v := range sum {
		img.SetGray(x, 0, color.Gray{Y: v})
		for y := 1; y < 4; y++ {
			img.SetGray(x, y, color.Gray{Y: uint8(c)})
		}
	}
	var buf bytes.Buffer
	err := png.Encode(&buf, img)
	return buf.Bytes(), err
}

// ClassName is the directory name of class c: zero-padded so names sort into label order.
func ClassName(c int) string { return fmt.Sprintf("class_%03d", c) }

type item struct {
	rel              string
	class            int
	patient, slide   int
	x, y             int
	png              bool
	targetSize, seed uint64
}

// CheckCounts says why count images cannot be generated in classes classes, if they cannot.
func CheckCounts(count, classes int) error {
	if count <= 0 || classes <= 0 {
		return fmt.Errorf("count and classes must be positive, got %d and %d", count, classes)
	}
	if count < classes {
		return fmt.Errorf("count %d is smaller than classes %d: every class needs at least one image (torchvision's ImageFolder refuses an empty class directory); ask for at least %d images or at most %d classes", count, classes, classes, count)
	}
	return nil
}

// Generate writes the dataset.
func Generate(ctx context.Context, o Options) error {
	if o.Classes == 0 {
		o.Classes = 4
	}
	if err := CheckCounts(o.Count, o.Classes); err != nil {
		return err
	}
	if o.MeanSize == 0 {
		o.MeanSize = 110_000
	}
	if o.MeanSize < 2000 {
		return fmt.Errorf("mean size %d is too small for a real image (at least 2000 bytes)", o.MeanSize)
	}
	if o.Patients == 0 {
		o.Patients = max(o.Count/25, o.Classes)
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	root, csvPath := Layout(o.Out)
	for c := range o.Classes {
		if err := os.MkdirAll(filepath.Join(root, ClassName(c)), 0o755); err != nil {
			return err
		}
		if o.Masks {
			if err := os.MkdirAll(filepath.Join(MaskRoot(o.Out), ClassName(c)), 0o755); err != nil {
				return err
			}
		}
	}
	items := plan(o)
	jpegBPP, pngBPP := bytesPerPixel(false), bytesPerPixel(true)

	// o.Workers goroutines take the images in turn; the first error ends them all (the run
	// fails anyway) and Wait returns it. No CSV is written unless every image was.
	g, gctx := errgroup.WithContext(ctx)
	var next atomic.Int64
	for range o.Workers {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) || gctx.Err() != nil {
					return nil
				}
				it := items[i]
				bpp := jpegBPP
				if it.png {
					bpp = pngBPP
				}
				data, err := encode(it, bpp)
				if err == nil {
					err = os.WriteFile(filepath.Join(root, filepath.FromSlash(it.rel)), data, 0o644)
				}
				if err == nil && o.Masks {
					var mask []byte
					if mask, err = MaskFor(data, it.class); err == nil {
						rel := strings.TrimSuffix(it.rel, filepath.Ext(it.rel)) + ".png"
						err = os.WriteFile(filepath.Join(MaskRoot(o.Out), filepath.FromSlash(rel)), mask, 0o644)
					}
				}
				if err != nil {
					return fmt.Errorf("generate %s: %w", it.rel, err)
				}
				if o.Progress != nil {
					o.Progress(i)
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeCSV(csvPath, items)
}

// plan decides every image's class, entity columns, format and size. Each patient has a
// dominant class (most of its tiles), so entity-disjoint splits are non-trivial, and class
// frequencies are imbalanced (class c is drawn in proportion to c+1).
func plan(o Options) []item {
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	var weights []float64
	total := 0.0
	for c := range o.Classes {
		weights = append(weights, float64(c+1))
		total += float64(c + 1)
	}
	draw := func() int {
		r := rng.Float64() * total
		for c, w := range weights {
			if r < w {
				return c
			}
			r -= w
		}
		return o.Classes - 1
	}
	dominant := make([]int, o.Patients)
	for p := range dominant {
		dominant[p] = draw()
	}
	items := make([]item, o.Count)
	for i := range items {
		p := rng.IntN(o.Patients)
		c := dominant[p]
		if rng.Float64() < 0.2 {
			c = draw()
		}
		it := item{
			class:   c,
			patient: p,
			slide:   rng.IntN(3),
			x:       rng.IntN(100) * 512,
			y:       rng.IntN(100) * 512,
			png:     rng.Float64() < o.PNGFraction,
			seed:    rng.Uint64(),
		}
		it.targetSize = uint64(float64(o.MeanSize) * (0.5 + rng.Float64()))
		it.rel = relName(c, i, it.png)
		items[i] = it
	}
	fillEmptyClasses(items, o.Classes)
	return items
}

func relName(class, i int, asPNG bool) string {
	ext := ".jpg"
	if asPNG {
		ext = ".png"
	}
	return fmt.Sprintf("%s/tile_%07d%s", ClassName(class), i, ext)
}

// fillEmptyClasses gives every class at least one item when there are at least as many
// items as classes: each class the draw left empty takes the last item of the largest
// class (which has two or more while a class is empty). With many classes and few images
// per class (1,500 in 1,000) the weighted draw leaves hundreds empty, and an empty class
// directory is refused by torchvision's ImageFolder before 0.17. Trees whose draw filled
// every class are unchanged.
func fillEmptyClasses(items []item, classes int) {
	members := make([][]int, classes)
	for i, it := range items {
		members[it.class] = append(members[it.class], i)
	}
	for c := range members {
		if len(members[c]) > 0 {
			continue
		}
		donor := 0
		for d := range members {
			if len(members[d]) > len(members[donor]) {
				donor = d
			}
		}
		if len(members[donor]) < 2 {
			return // fewer items than classes: Generate refuses that before planning
		}
		i := members[donor][len(members[donor])-1]
		members[donor] = members[donor][:len(members[donor])-1]
		members[c] = append(members[c], i)
		items[i].class = c
		items[i].rel = relName(c, i, items[i].png)
	}
}

// paint draws a w×h image: a class-coloured gradient with seeded noise, which JPEG and PNG
// compress about as much as photographs and tissue tiles do.
func paint(it item, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(it.seed, uint64(w)))
	base := [3]float64{float64(60 + 50*(it.class%4)), float64(80 + 40*(it.class/4%4)), 160}
	for y := range h {
		for x := range w {
			g := 60 * float64(x+y) / float64(w+h)
			n := rng.Uint32()
			img.SetRGBA(x, y, color.RGBA{
				R: clamp(base[0] + g + float64(n&63) - 32),
				G: clamp(base[1] - g + float64(n>>8&63) - 32),
				B: clamp(base[2] + g/2 + float64(n>>16&63) - 32),
				A: 255,
			})
		}
	}
	return img
}

func clamp(v float64) uint8 { return uint8(math.Max(0, math.Min(255, v))) }

func encodeImage(img image.Image, asPNG bool) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	if asPNG {
		err = png.Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	}
	return buf.Bytes(), err
}

func bytesPerPixel(asPNG bool) float64 {
	const side = 256
	data, err := encodeImage(paint(item{seed: 1}, side, side), asPNG)
	if err != nil || len(data) == 0 {
		return 1
	}
	return float64(len(data)) / (side * side)
}

func encode(it item, bpp float64) ([]byte, error) {
	side := int(math.Sqrt(float64(it.targetSize) / bpp))
	side = max(side, 16)
	// A 4:3 landscape tile of about the same area.
	w, h := side*8/7, side*6/7
	return encodeImage(paint(it, w, h), it.png)
}

func writeCSV(path string, items []item) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"path", "patient_id", "slide", "x", "y"})
	for _, it := range items {
		w.Write([]string{
			it.rel,
			fmt.Sprintf("P%04d", it.patient),
			fmt.Sprintf("P%04d-S%d", it.patient, it.slide),
			strconv.Itoa(it.x),
			strconv.Itoa(it.y),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
