package attach

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/index"
	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// makeClasses names the classes 0..max label: from the metadata's class column, named or
// found (classColumn), else class_<label>.
func (p *Plan) makeClasses(metaRows map[uuid.UUID]*metaRow) error {
	n := 0
	for _, r := range p.rows {
		n = max(n, r.label+1)
	}
	p.classes = make([]string, n)
	for l := range p.classes {
		p.classes[l] = fmt.Sprintf("class_%d", l)
	}
	// The candidates: the named class column, else every text column of the metadata.
	var cands []string
	named := ""
	for _, m := range p.meta {
		if m.class != "" {
			named = m.class
		}
	}
	if named != "" {
		cands = []string{named}
	} else {
		for _, m := range p.meta {
			for _, c := range m.cols {
				if col, _ := m.Column(c); slices.Contains(textTypes, col.Type) && !slices.Contains(cands, c) {
					cands = append(cands, c)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	byLabel := map[string]map[int]string{}
	byValue := map[string]map[string]int{}
	conflict := map[string]bool{}
	for _, c := range cands {
		byLabel[c], byValue[c] = map[int]string{}, map[string]int{}
	}
	for _, r := range p.rows {
		m := metaRows[r.id]
		if m == nil {
			continue
		}
		for _, c := range cands {
			v, ok := m.class[c]
			if !ok {
				v, ok = m.meta[c]
			}
			if !ok || v == "" {
				conflict[c] = true
				continue
			}
			if w, seen := byLabel[c][r.label]; seen && w != v {
				conflict[c] = true
			}
			if l, seen := byValue[c][v]; seen && l != r.label {
				conflict[c] = true
			}
			byLabel[c][r.label], byValue[c][v] = v, r.label
		}
	}
	if named != "" && conflict[named] {
		return inputErr("--class-column %s does not name the classes: a label has several values, or none, or a value several labels", named)
	}
	col, err := classColumn(metaTables(p.meta), cands, conflict)
	if err != nil || col == "" {
		return wrapInput(err)
	}
	seen := map[string]int{}
	for l, v := range byLabel[col] {
		if err := usableName(v); err != nil {
			return inputErr("class name %q (column %s, label %d): %v", v, col, l, err)
		}
		p.classes[l] = v
	}
	for l, c := range p.classes {
		if prev, dup := seen[c]; dup {
			return inputErr("labels %d and %d are both named %q", prev, l, c)
		}
		seen[c] = l
	}
	// The class names are the directories; as metadata they would say the same again.
	for k := range p.rows {
		delete(p.rows[k].meta, col)
	}
	p.columns = slices.DeleteFunc(p.columns, func(c string) bool { return c == col })
	return nil
}

// extensions are what both DALI's fn.readers.file and torchvision's ImageFolder read.
var extensions = []string{".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp"}

// usableName reports why s cannot be a file or directory name the readers see, or nil.
func usableName(s string) error {
	switch {
	case s == "" || s == "." || s == "..":
		return errors.New("empty or a dot name")
	case strings.HasPrefix(s, "."):
		return errors.New("hidden (leading '.'): readers skip it or count it as a class")
	case strings.ContainsAny(s, "/\x00\n\r"):
		return errors.New("holds '/', a NUL or a line break")
	case strings.TrimRightFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }) != s:
		return errors.New("ends in whitespace, which file_list.txt cannot carry")
	case len(s) > index.MaxNameLen:
		return fmt.Errorf("%d bytes, over %d", len(s), index.MaxNameLen)
	}
	return nil
}

func (p *Plan) checkNames() error {
	seen := map[string]uuid.UUID{}
	for _, r := range p.rows {
		if r.name == "" {
			continue
		}
		where := fmt.Sprintf("data table %s, row %s=%s", p.data[r.src].Table, p.data[r.src].id, r.id)
		if err := usableName(r.name); err != nil {
			return inputErr("%s: file name %q: %v", where, r.name, err)
		}
		dot := strings.LastIndexByte(r.name, '.')
		if dot < 0 || !slices.Contains(extensions, strings.ToLower(r.name[dot:])) {
			return inputErr("%s: file name %q has no extension the readers decode (%s)", where, r.name, strings.Join(extensions, " "))
		}
		full := p.classes[r.label] + "/" + r.name
		if other, dup := seen[full]; dup {
			return inputErr("%s: file name %s is also row %s's; names are unique within a class", where, full, other)
		}
		seen[full] = r.id
	}
	return nil
}

func (p *Plan) makeSplits() error {
	known := map[uuid.UUID]bool{}
	bySplit := map[string][]uuid.UUID{}
	for _, r := range p.rows {
		known[r.id] = true
		if s := p.data[r.src].split; s != "" {
			bySplit[s] = append(bySplit[s], r.id)
		}
	}
	for _, d := range p.data {
		if d.split != "" {
			p.splits = append(p.splits, store.NewSplit{Name: d.split, Members: bySplit[d.split]})
		}
	}
	for _, l := range p.opts.Lists {
		if _, clash := bySplit[l.Name]; clash {
			return inputErr("split list %s: a data table makes a split of that name", l.Name)
		}
		seen := map[uuid.UUID]bool{}
		for k, id := range l.IDs {
			switch {
			case !known[id]:
				return inputErr("split list %s, line %d: %s is in no data table", l.Name, k+1, id)
			case seen[id]:
				return inputErr("split list %s, line %d: %s is listed twice", l.Name, k+1, id)
			}
			seen[id] = true
		}
		bySplit[l.Name] = l.IDs
		p.splits = append(p.splits, store.NewSplit{Name: l.Name, Members: l.IDs})
	}
	for _, s := range p.splits {
		if len(s.Members) == 0 {
			return inputErr("split %s would be empty", s.Name)
		}
	}
	return nil
}
