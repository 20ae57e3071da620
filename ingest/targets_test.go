package ingest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
)

// Every image gets the target at its path with any extension, stored as a blob of its own
// and described in its row; a re-run writes nothing.
func TestTargetsIngest(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "img1", "a/2.png": "img2", "b/scan.jpg": "img3", "b/x.gif": "skipped"})
	targets := testkit.WriteTree(t, map[string]string{"a/1.png": "mask1", "a/2.npy": "vec2", "b/scan.nii.gz": "vol3", "b/x.png": "of a skipped image"})
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, Targets: targets})
	if len(rep.Skipped) != 1 || rep.Skipped[0].Path != "b/x.gif" {
		t.Errorf("skipped %v, want b/x.gif alone (its target goes with it)", rep.Skipped)
	}
	if rep.Written != 3 || err != nil {
		t.Fatalf("written %d (%v), want 3", rep.Written, err)
	}
	got := scan(t, st)
	for name, want := range map[string]struct{ ext, data string }{"a/1.jpg": {".png", "mask1"}, "a/2.png": {".npy", "vec2"}, "b/scan.jpg": {".nii.gz", "vol3"}} {
		s := got[name]
		if s.Target == nil || s.Target.Ext != want.ext || s.Target.Checksum != store.Checksum([]byte(want.data)) {
			t.Errorf("%s: target %+v, want %s of %q", name, s.Target, want.ext, want.data)
			continue
		}
		b, err := st.Get(context.Background(), store.TargetID(s.ID), nil)
		if err != nil || !bytes.Equal(b.Data, []byte(want.data)) || b.Label != s.Label {
			t.Errorf("%s: target blob %q label %d (%v), want %q label %d", name, b.Data, b.Label, err, want.data, s.Label)
		}
	}
	rep = testkit.Must(run(t, st, Options{Root: root, Targets: targets}))(t)
	if rep.Written != 0 || rep.Unchanged != 3 {
		t.Errorf("re-run wrote %d, kept %d; want 0 and 3", rep.Written, rep.Unchanged)
	}
}

// Pairing problems are errors naming the file, found before anything is written.
func TestTargetsBadInput(t *testing.T) {
	images := map[string]string{"a/1.jpg": "i1", "a/2.jpg": "i2"}
	for _, tc := range []struct {
		name    string
		targets map[string]string
		max     int64
		want    string
	}{
		{"missing", map[string]string{"a/1.png": "m"}, 0, "image a/2.jpg has no target"},
		{"extra", map[string]string{"a/1.png": "m", "a/2.png": "m", "a/3.png": "m"}, 0, "target a/3.png matches no image"},
		{"mismatched name", map[string]string{"a/1.png": "m", "a/2x.png": "m"}, 0, "target a/2x.png matches no image"},
		{"other class", map[string]string{"a/1.png": "m", "b/2.png": "m"}, 0, "target b/2.png matches no image"},
		{"two targets", map[string]string{"a/1.png": "m", "a/1.npy": "m", "a/2.png": "m"}, 0, "image a/1.jpg has two targets"},
		{"too large", map[string]string{"a/1.png": "m", "a/2.png": strings.Repeat("m", 100)}, 50, "target a/2.png: 100 bytes, over the size limit"},
		{"empty", map[string]string{"a/1.png": "m", "a/2.png": ""}, 0, "target a/2.png: empty file"},
		{"nested", map[string]string{"a/1.png": "m", "a/2.png": "m", "a/sub/3.png": "m"}, 0, "a/sub/: a directory"},
		{"in the root", map[string]string{"a/1.png": "m", "a/2.png": "m", "3.png": "m"}, 0, "3.png: a target must be <class>/<file>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New("ds", memstore.Options{})
			_, err := run(t, st, Options{Root: testkit.WriteTree(t, images), Targets: testkit.WriteTree(t, tc.targets), MaxSize: tc.max})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
			if n := st.Blobs(); n != 0 {
				t.Errorf("%d blobs written: nothing may be", n)
			}
		})
	}
}

// A dataset's samples all have targets or none do.
func TestTargetsAllOrNone(t *testing.T) {
	st := memstore.New("ds", memstore.Options{})
	root := testkit.WriteTree(t, map[string]string{"a/1.jpg": "i1"})
	if _, err := run(t, st, Options{Root: root}); err != nil {
		t.Fatal(err)
	}
	more := testkit.WriteTree(t, map[string]string{"a/2.jpg": "i2"})
	_, err := run(t, st, Options{Root: more, Targets: testkit.WriteTree(t, map[string]string{"a/2.png": "m"})})
	if err == nil || !strings.Contains(err.Error(), "samples without targets (a/1.jpg") {
		t.Errorf("adding samples with targets to a dataset without: %v", err)
	}
	// The whole tree again, with targets: every sample gains one.
	both := testkit.WriteTree(t, map[string]string{"a/1.jpg": "i1", "a/2.jpg": "i2"})
	if _, err := run(t, st, Options{Root: both, Targets: testkit.WriteTree(t, map[string]string{"a/1.png": "m1", "a/2.png": "m2"})}); err != nil {
		t.Fatal(err)
	}
	for name, s := range scan(t, st) {
		if s.Target == nil {
			t.Errorf("%s has no target", name)
		}
	}
	_, err = run(t, st, Options{Root: testkit.WriteTree(t, map[string]string{"a/3.jpg": "i3"})})
	if err == nil || !strings.Contains(err.Error(), "ingest with --targets") {
		t.Errorf("adding samples without targets to a dataset with: %v", err)
	}
}

// --unlabeled: the files directly in the root are one class; targets and CSV name them
// without a class.
func TestUnlabeled(t *testing.T) {
	root := testkit.WriteTree(t, map[string]string{"1.jpg": "i1", "2.png": "i2", "sub/3.jpg": "nested", "meta.csv": "path,patient_id\n1.jpg,p1\n2.png,p2\n"})
	targets := testkit.WriteTree(t, map[string]string{"1.png": "m1", "2.png": "m2"})
	st := memstore.New("ds", memstore.Options{})
	rep, err := run(t, st, Options{Root: root, Unlabeled: true, Targets: targets, CSV: root + "/meta.csv"})
	if rep.Written != 2 {
		t.Fatalf("written %d (%v), want 2", rep.Written, err)
	}
	var paths []string
	for _, s := range rep.Skipped {
		paths = append(paths, s.Path)
	}
	if strings.Join(paths, " ") != "meta.csv sub/" {
		t.Errorf("skipped %q, want meta.csv and sub/ by their own names", paths)
	}
	got := scan(t, st)
	if s := got["unlabeled/1.jpg"]; s.Label != 0 || s.Target == nil || s.Meta["patient_id"] != "p1" {
		t.Errorf("unlabeled/1.jpg = %+v", s)
	}
	labels, err := st.Labels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) != 1 || labels[0] != UnlabeledClass {
		t.Errorf("labels %q, want [%s]", labels, UnlabeledClass)
	}
}
