package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/store"
)

// FuzzApplyCSV: whatever the metadata CSV holds, applyCSV never panics, and when it accepts
// the file every column is a valid, unique metadata column and every value it attached came
// from the row naming that file.
func FuzzApplyCSV(f *testing.F) {
	for _, s := range []string{
		"path,patient_id,slide\ncat/a.jpg,p1,s1\ndog/b b.png,p2,\n",
		"\ufeffpath,x\n./cat/a.jpg,1\n",
		"path,path\ncat/a.jpg,cat/a.jpg\n",
		"path,label\ncat/a.jpg,1\n",
		"path,x\ncat/a.jpg,1\ncat/a.jpg,2\n",
		"path,x\n\"cat/a.jpg,1\n",
		"path,Ünïcode\ncat/a.jpg,é\n",
		"",
		"x\n1\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		tmp, err := os.CreateTemp(dir, "meta-*.csv")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(tmp.Name())
		tmp.WriteString(content)
		tmp.Close()
		files := []file{{rel: "cat/a.jpg"}, {rel: "dog/b b.png"}, {rel: "dog/c.jpg"}}
		cols, err := applyCSV(tmp.Name(), "path", filepath.Dir(tmp.Name()), false, files, []Skip{{Path: "dog/bad.jpg"}})
		if err != nil {
			if !strings.Contains(err.Error(), "metadata CSV") {
				t.Fatalf("error does not say it is about the metadata CSV: %v", err)
			}
			return
		}
		for i, c := range cols {
			if store.ValidColumnName(c) != nil || slices.Contains(cols[:i], c) {
				t.Fatalf("accepted column %q (columns %q)", c, cols)
			}
		}
		for _, fl := range files {
			for k, v := range fl.meta {
				if !slices.Contains(cols, k) || v == "" {
					t.Fatalf("%s got %s=%q, columns %q", fl.rel, k, v, cols)
				}
				if !strings.Contains(content, v) {
					t.Fatalf("%s got value %q that is not in the CSV", fl.rel, v)
				}
			}
		}
	})
}
