package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cassfs/cassfs/store"
)

// Targets: a second tree beside the images (Options.Targets) with, for every image
// <class>/<stem><ext>, exactly one target <class>/<stem><text> of any extension text — a
// segmentation mask as PNG, a label vector as .npy, boxes as .json. Every problem with the
// pairing is an error naming the file, before anything is written: a target that matches
// no image, an image without a target, two targets for one image, an unreadable, empty or
// oversized target. The target of an image that is skipped is skipped with it.

// pairTargets attaches each file's target (abs path, extension, size) from the tree at
// root. unlabeled: the targets are directly in root, like the images.
func pairTargets(root string, unlabeled bool, maxSize int64, files []file, skipped []Skip) error {
	if err := checkDir("targets root", root); err != nil {
		return err
	}
	// An image is known by "<class>/<stem>": its path without its extension.
	byStem := map[string]int{}
	for i, f := range files {
		byStem[stem(f.rel)] = i
	}
	skippedStem := map[string]bool{}
	for _, s := range skipped {
		skippedStem[stem(s.Path)] = true
	}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			problem("%v", err)
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		depth := strings.Count(rel, "/")
		if e.IsDir() {
			if rel != "." && (unlabeled || depth > 0) {
				problem("%s/: a directory where targets must be files (<class>/<file>, as the images)", rel)
				return filepath.SkipDir
			}
			return nil
		}
		if unlabeled {
			rel = UnlabeledClass + "/" + rel
		} else if depth != 1 {
			problem("%s: a target must be <class>/<file>, as the images", rel)
			return nil
		}
		i, ext, ok := matchTarget(rel, byStem)
		if !ok {
			if !skippedStem[stem(rel)] {
				problem("target %s matches no image (want the image's path with any extension)", rel)
			}
			return nil
		}
		f := &files[i]
		if f.target != "" {
			problem("image %s has two targets: %s and %s", f.rel, filepath.Base(f.target), filepath.Base(p))
			return nil
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			problem("target %s: not a readable regular file", rel)
			return nil
		}
		if err := checkSize(st.Size(), maxSize); err != nil {
			problem("target %s: %v", rel, err)
			return nil
		}
		if err := store.ValidTargetExt(ext); err != nil {
			problem("target %s: %v", rel, err)
			return nil
		}
		f.target, f.targetExt, f.targetSize = p, ext, st.Size()
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.target == "" {
			problem("image %s has no target (want %s.<ext> under %s)", f.rel, stem(f.rel), root)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("targets %s: %s", root, strings.Join(problems, "; "))
	}
	return nil
}

// stem is a path without the extension of its file name.
func stem(rel string) string {
	if k := strings.LastIndexByte(rel, '.'); k > strings.LastIndexByte(rel, '/') {
		return rel[:k]
	}
	return rel
}

// matchTarget finds the image a target path belongs to: one whose stem the target's name
// continues with an extension (".png", or ".nii.gz" after "scan").
func matchTarget(rel string, byStem map[string]int) (i int, ext string, ok bool) {
	slash := strings.LastIndexByte(rel, '/')
	for k := len(rel) - 1; k > slash+1; k-- {
		if rel[k] != '.' {
			continue
		}
		if i, ok := byStem[rel[:k]]; ok {
			return i, rel[k:], true
		}
	}
	return 0, "", false
}
