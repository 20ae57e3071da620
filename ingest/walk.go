package ingest

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/store"
)

// checkDir reports why dir, the what, is not a directory to read, or nil.
func checkDir(what, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	return nil
}

// walkUnlabeled lists the files directly in root as the one class UnlabeledClass.
func walkUnlabeled(root string, maxSize int64) (classes []string, files []file, skipped []Skip, err error) {
	if err := checkDir("dataset root", root); err != nil {
		return nil, nil, nil, err
	}
	files, skipped, err = walkClassDir(root, UnlabeledClass, maxSize)
	if err != nil || len(files) == 0 {
		return nil, files, skipped, err
	}
	return []string{UnlabeledClass}, files, skipped, nil
}

// walk lists root's classes and candidate files, with the entries it rejects and why.
func walk(root string, maxSize int64) (classes []string, files []file, skipped []Skip, err error) {
	if err := checkDir("dataset root", root); err != nil {
		return nil, nil, nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read dataset root: %w", err)
	}
	byClass := map[string][]file{}
	for _, e := range entries { // os.ReadDir sorts by name: bytewise, as the readers do
		name := e.Name()
		abs := filepath.Join(root, name)
		st, err := os.Stat(abs) // follows symlinks
		if err != nil {
			skipped = append(skipped, Skip{name, fmt.Sprintf("unreadable: %v", unwrapPath(err))})
			continue
		}
		if !st.IsDir() {
			skipped = append(skipped, Skip{name, "file directly in the dataset root; files belong in <class>/ directories"})
			continue
		}
		if err := checkName(name); err != nil {
			skipped = append(skipped, Skip{name + "/", "class directory skipped: " + err.Error()})
			continue
		}
		cf, cs, err := walkClass(root, name, maxSize)
		if err != nil {
			return nil, nil, nil, err
		}
		skipped = append(skipped, cs...)
		// A directory is a class even with no ingestible file: DALI's fn.readers.file numbers
		// every directory of file_root, and torchvision's ImageFolder (allow_empty=True, from
		// 0.17) every directory, so dropping it would shift the labels of every class after it.
		classes = append(classes, name)
		byClass[name] = cf
	}
	for label, c := range classes {
		for _, f := range byClass[c] {
			f.label = label
			files = append(files, f)
		}
	}
	return classes, files, skipped, nil
}

func walkClass(root, class string, maxSize int64) ([]file, []Skip, error) {
	return walkClassDir(filepath.Join(root, class), class, maxSize)
}

// walkClassDir lists the files of class, in directory dir.
func walkClassDir(dir, class string, maxSize int64) ([]file, []Skip, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []Skip{{class + "/", fmt.Sprintf("unreadable class directory: %v", unwrapPath(err))}}, nil
	}
	var files []file
	var skipped []Skip
	for _, e := range entries {
		rel := class + "/" + e.Name()
		abs := filepath.Join(dir, e.Name())
		st, err := os.Stat(abs)
		if err != nil {
			skipped = append(skipped, Skip{rel, fmt.Sprintf("unreadable: %v", unwrapPath(err))})
			continue
		}
		if st.IsDir() {
			skipped = append(skipped, Skip{rel + "/", "nested directory; datasets are <class>/<file>, two levels deep"})
			continue
		}
		if !st.Mode().IsRegular() {
			skipped = append(skipped, Skip{rel, "not a regular file"})
			continue
		}
		if err := checkName(e.Name()); err != nil {
			skipped = append(skipped, Skip{rel, err.Error()})
			continue
		}
		if ext := strings.ToLower(path.Ext(e.Name())); !slices.Contains(Extensions, ext) {
			skipped = append(skipped, Skip{rel, fmt.Sprintf("extension %q is not readable by DALI and torchvision (accepted: %s)", path.Ext(e.Name()), strings.Join(Extensions, " "))})
			continue
		}
		if err := checkSize(st.Size(), maxSize); err != nil {
			skipped = append(skipped, Skip{rel, err.Error()})
			continue
		}
		files = append(files, file{rel: rel, abs: abs, size: st.Size()})
	}
	return files, skipped, nil
}

// applyCSV reads the metadata CSV and attaches each row to its file. Any problem is an
// error: nothing has been written yet.
func applyCSV(csvPath, key, root string, unlabeled bool, files []file, skipped []Skip) ([]string, error) {
	f, err := os.Open(csvPath)
	if err != nil {
		return nil, fmt.Errorf("metadata CSV: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("metadata CSV %s is empty; it needs a header row with a %q column", csvPath, key)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata CSV %s: %w", csvPath, err)
	}
	header[0] = strings.TrimPrefix(header[0], "\ufeff") // a byte-order mark from spreadsheets
	keyIdx := -1
	var columns []string
	var problems []string
	seen := map[string]bool{}
	for i, h := range header {
		if h == key {
			if keyIdx >= 0 {
				problems = append(problems, fmt.Sprintf("column %q appears twice", h))
			}
			keyIdx = i
			continue
		}
		if seen[h] {
			problems = append(problems, fmt.Sprintf("column %q appears twice", h))
			continue
		}
		seen[h] = true
		if err := store.ValidColumnName(h); err != nil {
			problems = append(problems, err.Error())
		}
		columns = append(columns, h)
	}
	if keyIdx < 0 {
		problems = append(problems, fmt.Sprintf("no %q column naming each file as <class>/<file> (see --csv-key)", key))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("metadata CSV %s: %s", csvPath, strings.Join(problems, "; "))
	}
	idx := make(map[string]int, len(files))
	for i, f := range files {
		idx[f.rel] = i
	}
	rejected := map[string]bool{}
	for _, s := range skipped {
		rejected[s.Path] = true
	}
	rowOf := map[string]int{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			problems = append(problems, err.Error())
			if len(problems) >= 20 {
				break
			}
			continue
		}
		line, _ := r.FieldPos(keyIdx)
		p := strings.TrimPrefix(filepath.ToSlash(rec[keyIdx]), "./")
		shown := p
		if unlabeled {
			p = UnlabeledClass + "/" + p // an unlabeled dataset's files are named without a class
		}
		if prev, dup := rowOf[p]; dup {
			problems = append(problems, fmt.Sprintf("line %d: path %q duplicates line %d", line, shown, prev))
			continue
		}
		rowOf[p] = line
		i, ok := idx[p]
		if !ok {
			if !rejected[p] {
				problems = append(problems, fmt.Sprintf("line %d: %q names no file under %s", line, shown, root))
			}
			continue
		}
		meta := make(map[string]string, len(columns))
		for j, v := range rec {
			if j != keyIdx && v != "" {
				meta[header[j]] = v
			}
		}
		files[i].meta = meta
		if len(problems) >= 20 {
			break
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("metadata CSV %s: %s", csvPath, strings.Join(problems, "; "))
	}
	return columns, nil
}
