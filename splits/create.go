package splits

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Item is one sample as split creation sees it.
type Item struct {
	ID    uuid.UUID
	Label int
	Group string // entity key: items with the same key end up in the same split
}

// Balance modes of Spec.Balance.
const (
	BalanceOriginal = "original" // the dataset's class proportions
	BalanceUniform  = "uniform"  // every class (that has samples) equally
	BalanceWeights  = "weights"  // Spec.Weights
)

// Spec says what to create.
type Spec struct {
	Names      []string  // one per split
	Ratios     []float64 // relative sizes, one per split
	Balance    string    // BalanceOriginal (default), BalanceUniform or BalanceWeights
	Weights    []float64 // per label, for BalanceWeights
	MaxSamples int       // cap on the samples over all splits (0: as many as the balance allows)
	Seed       uint64
	// Tolerance is the largest relative shortfall of a split's size below its target that
	// is accepted (default 0.1); beyond it Create fails, unless AcceptShortfall.
	Tolerance       float64
	AcceptShortfall bool
}

// Made is one created split.
type Made struct {
	Name    string
	Members []uuid.UUID // ascending
}

// Report is what Create achieved against what was asked. It is stored with the splits.
type Report struct {
	Classes      []string      `json:"classes"`
	Groups       int           `json:"groups"`
	Available    int           `json:"available"` // samples in the dataset
	Asked        int           `json:"asked"`     // total asked for (after the balance's cap)
	Total        int           `json:"total"`     // samples in all splits
	Splits       []SplitReport `json:"splits"`
	SharedGroups int           `json:"shared_groups"` // groups found in more than one split: always 0
	Notes        []string      `json:"notes,omitempty"`
}

// SplitReport is one split's figures.
type SplitReport struct {
	Name          string  `json:"name"`
	AskedRatio    float64 `json:"asked_ratio"`
	Ratio         float64 `json:"ratio"` // share of Total
	AskedSize     int     `json:"asked_size"`
	Size          int     `json:"size"`
	Groups        int     `json:"groups"`
	AskedByClass  []int   `json:"asked_by_class"`
	ByClass       []int   `json:"by_class"`
	Shortfall     float64 `json:"shortfall"` // 1 - Size/AskedSize when below target, else 0
	ShortfallNote string  `json:"shortfall_note,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ReservedNames are directory names of a mount's root that a stored split may not take.
var ReservedNames = []string{"all", "by-uuid"}

// ValidName reports why name cannot name a split, or nil.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid split name %q: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit", name)
	}
	if slices.Contains(ReservedNames, name) {
		return fmt.Errorf("invalid split name %q: reserved (the mount shows %s itself)", name, strings.Join(ReservedNames, " and "))
	}
	return nil
}

// ParseRatios reads "7:2:1" (also "0.7,0.2,0.1").
func ParseRatios(s string) ([]float64, error) {
	sep := ":"
	if !strings.Contains(s, ":") {
		sep = ","
	}
	var out []float64
	sum := 0.0
	for _, f := range strings.Split(s, sep) {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("ratios %q: %q is not a non-negative number (want e.g. 7:2:1)", s, f)
		}
		out = append(out, v)
		sum += v
	}
	if sum <= 0 {
		return nil, fmt.Errorf("ratios %q sum to zero: at least one split must get samples", s)
	}
	return out, nil
}

func (sp *Spec) check(labels []string) error {
	if len(sp.Names) == 0 {
		return errors.New("no split names given")
	}
	if len(sp.Ratios) != len(sp.Names) {
		return fmt.Errorf("%d split names (%s) but %d ratios: give one ratio per name", len(sp.Names), strings.Join(sp.Names, ","), len(sp.Ratios))
	}
	for i, n := range sp.Names {
		if err := ValidName(n); err != nil {
			return err
		}
		if slices.Contains(sp.Names[:i], n) {
			return fmt.Errorf("split name %q given twice", n)
		}
	}
	if err := checkShares("ratio", sp.Ratios); err != nil {
		return fmt.Errorf("%w: at least one split must get samples", err)
	}
	if sp.MaxSamples < 0 {
		return fmt.Errorf("maximum number of samples %d is negative", sp.MaxSamples)
	}
	switch sp.Balance {
	case "", BalanceOriginal, BalanceUniform:
	case BalanceWeights:
		if len(sp.Weights) != len(labels) {
			return fmt.Errorf("%d class weights for %d classes (%s): give one weight per class, in label order", len(sp.Weights), len(labels), strings.Join(labels, ","))
		}
		if err := checkShares("class weight", sp.Weights); err != nil {
			return err
		}
	default:
		return fmt.Errorf("balance %q: use original, uniform or class weights", sp.Balance)
	}
	if sp.Tolerance == 0 {
		sp.Tolerance = 0.1
	}
	return nil
}

// group is one entity's samples. It is sparse (only the classes it has), so that a million
// one-sample groups over a thousand classes stay small.
// checkShares checks ratios or weights: non-negative finite numbers, not all zero.
func checkShares(what string, v []float64) error {
	sum := 0.0
	for _, x := range v {
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%s %v: %ss must be non-negative numbers", what, x, what)
		}
		sum += x
	}
	if sum <= 0 {
		return fmt.Errorf("the %ss sum to zero", what)
	}
	return nil
}

type group struct {
	key     string
	classes []int         // labels present, ascending
	ids     [][]uuid.UUID // parallel to classes: that class's samples, in draw order
	size    int
	share   float64 // the largest share of one class's samples the group holds
	split   int     // -1 while unassigned
}

func (g *group) add(label int, id uuid.UUID) {
	k := slices.Index(g.classes, label) // groups hold few classes
	if k < 0 {
		k = len(g.classes)
		g.classes = append(g.classes, label)
		g.ids = append(g.ids, nil)
	}
	g.ids[k] = append(g.ids[k], id)
	g.size++
}

func compareIDs(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

// Create makes the splits of spec from items, whose labels index labels.
func Create(items []Item, labels []string, spec Spec) ([]Made, *Report, error) {
	if err := spec.check(labels); err != nil {
		return nil, nil, err
	}
	nc, ns := len(labels), len(spec.Names)
	if len(items) == 0 {
		return nil, nil, errors.New("the dataset has no samples")
	}
	rng := splitMix64(EpochKey("\x00split-create", spec.Seed, 0))

	// Groups in a seeded random order; their samples in a seeded random order each.
	counts := make([]int, nc)
	index := map[string]*group{}
	var groups []*group
	for _, it := range items {
		if it.Label < 0 || it.Label >= nc {
			return nil, nil, fmt.Errorf("sample %s has label %d, outside the dataset's %d classes", it.ID, it.Label, nc)
		}
		g := index[it.Group]
		if g == nil {
			g = &group{key: it.Group, split: -1}
			index[it.Group] = g
			groups = append(groups, g)
		}
		g.add(it.Label, it.ID)
		counts[it.Label]++
	}
	index = nil
	if len(groups) < ns {
		return nil, nil, fmt.Errorf("%d splits asked for, but the samples form only %d groups: a group cannot be divided, so use fewer splits or a finer --group-by", ns, len(groups))
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.key, b.key) })
	shuffle(&rng, len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	for _, g := range groups {
		// Classes ascending, each class's samples in canonical then seeded random order: the
		// items' own order never matters.
		order := make([]int, len(g.classes))
		for k := range order {
			order[k] = k
		}
		slices.SortFunc(order, func(a, b int) int { return g.classes[a] - g.classes[b] })
		classes, ids := make([]int, len(order)), make([][]uuid.UUID, len(order))
		for k, o := range order {
			classes[k], ids[k] = g.classes[o], g.ids[o]
		}
		g.classes, g.ids = classes, ids
		for _, list := range g.ids {
			slices.SortFunc(list, compareIDs)
			shuffle(&rng, len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		}
	}

	// Class shares and the total the balance allows.
	share := make([]float64, nc)
	rep := &Report{Classes: slices.Clone(labels), Groups: len(groups), Available: len(items)}
	switch spec.Balance {
	case BalanceUniform:
		present := 0
		for _, n := range counts {
			if n > 0 {
				present++
			}
		}
		for c, n := range counts {
			if n > 0 {
				share[c] = 1 / float64(present)
			} else {
				rep.Notes = append(rep.Notes, fmt.Sprintf("class %q has no samples and is left out of the uniform balance", labels[c]))
			}
		}
	case BalanceWeights:
		wsum := 0.0
		for _, w := range spec.Weights {
			wsum += w
		}
		for c, w := range spec.Weights {
			if w > 0 && counts[c] == 0 {
				return nil, nil, fmt.Errorf("class %q has weight %v but no samples: the balance cannot be met; give it weight 0", labels[c], w)
			}
			share[c] = w / wsum
		}
	default:
		for c, n := range counts {
			share[c] = float64(n) / float64(len(items))
		}
	}
	total := len(items)
	for c, q := range share {
		if q > 0 {
			total = min(total, int(math.Floor(float64(counts[c])/q+1e-9)))
		}
	}
	if spec.MaxSamples > 0 {
		if spec.MaxSamples > total {
			rep.Notes = append(rep.Notes, fmt.Sprintf("asked for %d samples; the dataset and the balance allow %d", spec.MaxSamples, total))
		}
		total = min(total, spec.MaxSamples)
	}
	useAll := (spec.Balance == "" || spec.Balance == BalanceOriginal) && spec.MaxSamples == 0
	rep.Asked = total

	rsum := 0.0
	for _, r := range spec.Ratios {
		rsum += r
	}
	ratio := make([]float64, ns)
	for s, r := range spec.Ratios {
		ratio[s] = r / rsum
	}

	// Deal groups: round-robin, each split taking the next group that fits its capacity.
	capacity := make([][]float64, ns)
	have := make([][]int, ns)
	ngroups := make([]int, ns)
	for s := range ns {
		capacity[s] = make([]float64, nc)
		have[s] = make([]int, nc)
		for c := range nc {
			capacity[s][c] = float64(counts[c])*ratio[s] + 1e-9
		}
	}
	assign := func(g *group, s int) {
		g.split = s
		ngroups[s]++
		for k, c := range g.classes {
			have[s][c] += len(g.ids[k])
		}
	}
	fits := func(g *group, s int) bool {
		for k, c := range g.classes {
			if float64(have[s][c]+len(g.ids[k])) > capacity[s][c] {
				return false
			}
		}
		return true
	}
	// Groups holding the largest share of some class are dealt first, so that a scarce
	// class is spread over the splits before common ones fill them; among equals the
	// seeded order stays (on generated cohorts, dealing in the seeded order alone leaves
	// some splits well short of their target).
	for _, g := range groups {
		for k, c := range g.classes {
			g.share = max(g.share, float64(len(g.ids[k]))/float64(counts[c]))
		}
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return cmp.Compare(b.share, a.share) })
	cursor := make([]int, ns)
	for progress := true; progress; {
		progress = false
		for s := range ns {
			for cursor[s] < len(groups) && (groups[cursor[s]].split >= 0 || !fits(groups[cursor[s]], s)) {
				cursor[s]++ // a group that does not fit now never will: have only grows
			}
			if cursor[s] < len(groups) {
				assign(groups[cursor[s]], s)
				progress = true
			}
		}
	}
	// A split that got nothing takes the smallest group left (if a ratio is not zero).
	for s := range ns {
		if ngroups[s] > 0 || ratio[s] == 0 {
			continue
		}
		var best *group
		for _, g := range groups {
			if g.split < 0 && (best == nil || g.size < best.size) {
				best = g
			}
		}
		if best == nil {
			return nil, nil, fmt.Errorf("split %q got no group: every group is larger than its share (%.0f samples); use fewer splits, larger ratios or a finer --group-by", spec.Names[s], float64(len(items))*ratio[s])
		}
		assign(best, s)
	}
	// The rest at random, weighted by how much of the group each split still has room for.
	weight := make([]float64, ns)
	for _, g := range groups {
		if g.split >= 0 {
			continue
		}
		// Only the splits it overflows least are candidates.
		least := math.Inf(1)
		for s := range ns {
			over := 0.0
			for k, c := range g.classes {
				over += max(0, float64(have[s][c]+len(g.ids[k]))-capacity[s][c])
			}
			weight[s] = -over
			least = min(least, over)
		}
		sum := 0.0
		for s := range ns {
			if -weight[s] > least+1e-9 || ratio[s] == 0 {
				weight[s] = 0
				continue
			}
			weight[s] = 0
			for k, c := range g.classes {
				weight[s] += min(float64(len(g.ids[k])), max(0, capacity[s][c]-float64(have[s][c])))
			}
			weight[s] = max(weight[s], 1e-9)
			sum += weight[s]
		}
		if sum == 0 {
			copy(weight, ratio)
			sum = 1
		}
		x := float64(rng.next()>>11) / (1 << 53) * sum
		s := 0
		for ; s < ns-1 && x >= weight[s]; s++ {
			x -= weight[s]
		}
		for weight[s] == 0 && s > 0 { // rounding at the top end
			s--
		}
		assign(g, s)
	}

	// Targets, scaled down per split where its groups lack a class, then the draw.
	asked := apportion(total, ratio, share)
	made := make([]Made, ns)
	var short []string
	for s := range ns {
		sr := SplitReport{Name: spec.Names[s], AskedRatio: ratio[s], Groups: ngroups[s], AskedByClass: asked[s], ByClass: make([]int, nc)}
		target := slices.Clone(asked[s])
		if useAll {
			copy(target, have[s])
		} else {
			f := 1.0
			worst := -1
			for c, a := range asked[s] {
				if a > 0 && float64(have[s][c]) < float64(a)*f {
					f, worst = float64(have[s][c])/float64(a), c
				}
			}
			if worst >= 0 {
				for c := range target {
					target[c] = int(math.Floor(float64(asked[s][c]) * f))
				}
				sr.ShortfallNote = fmt.Sprintf("its groups hold %d %q samples of the %d the balance needs; all its classes were scaled to %.0f%%",
					have[s][worst], labels[worst], asked[s][worst], 100*f)
			}
		}
		// Per class, the split's groups' samples in group order; drawn one per group in turn,
		// exhausted groups dropping out, so the draw costs O(samples).
		lists := make([][][]uuid.UUID, nc)
		for _, g := range groups {
			if g.split == s {
				for k, c := range g.classes {
					lists[c] = append(lists[c], g.ids[k])
				}
			}
		}
		for c := range nc {
			active, got := lists[c], 0
			for got < target[c] && len(active) > 0 {
				next := active[:0]
				for _, ids := range active {
					if got == target[c] {
						break
					}
					made[s].Members = append(made[s].Members, ids[0])
					got++
					if len(ids) > 1 {
						next = append(next, ids[1:])
					}
				}
				active = next
			}
			sr.ByClass[c] = got
			sr.AskedSize += asked[s][c]
			sr.Size += got
		}
		made[s].Name = spec.Names[s]
		slices.SortFunc(made[s].Members, compareIDs)
		if !useAll && sr.AskedSize > 0 && sr.Size < sr.AskedSize {
			sr.Shortfall = 1 - float64(sr.Size)/float64(sr.AskedSize)
		}
		if sr.Shortfall > spec.Tolerance {
			short = append(short, fmt.Sprintf("split %q holds %d samples, %.0f%% short of the %d asked: %s", sr.Name, sr.Size, 100*sr.Shortfall, sr.AskedSize, sr.ShortfallNote))
		}
		rep.Total += sr.Size
		rep.Splits = append(rep.Splits, sr)
	}
	for s := range rep.Splits {
		if rep.Total > 0 {
			rep.Splits[s].Ratio = float64(rep.Splits[s].Size) / float64(rep.Total)
		}
	}
	rep.SharedGroups = sharedGroups(items, made)
	if rep.SharedGroups != 0 {
		return nil, nil, fmt.Errorf("internal error: %d groups ended up in more than one split", rep.SharedGroups)
	}
	if len(short) > 0 && !spec.AcceptShortfall {
		return nil, rep, &ShortfallError{Problems: short}
	}
	return made, rep, nil
}

// ShortfallError says that the requested balance could not be met within the tolerance,
// and what was achieved instead.
type ShortfallError struct{ Problems []string }

func (e *ShortfallError) Error() string {
	return "the requested class balance cannot be met:\n  " + strings.Join(e.Problems, "\n  ") +
		"\naccept the smaller splits with --accept-shortfall, or change --balance, --ratios or --group-by"
}

// sharedGroups counts groups whose samples are in more than one of made, checked on the
// result itself.
func sharedGroups(items []Item, made []Made) int {
	where := map[uuid.UUID]int{}
	for s, m := range made {
		for _, id := range m.Members {
			where[id] = s
		}
	}
	in := map[string]int{}
	shared := map[string]bool{}
	for _, it := range items {
		s, ok := where[it.ID]
		if !ok {
			continue
		}
		if prev, seen := in[it.Group]; seen && prev != s {
			shared[it.Group] = true
		}
		in[it.Group] = s
	}
	return len(shared)
}

// apportion divides total into cells ratio[s]·share[c] with the largest-remainder method, so
// the cells add up to total exactly.
func apportion(total int, ratio, share []float64) [][]int {
	type cell struct {
		s, c int
		rem  float64
	}
	out := make([][]int, len(ratio))
	var cells []cell
	sum := 0
	for s, r := range ratio {
		out[s] = make([]int, len(share))
		for c, q := range share {
			v := float64(total) * r * q
			out[s][c] = int(math.Floor(v))
			sum += out[s][c]
			if r*q > 0 {
				cells = append(cells, cell{s, c, v - math.Floor(v)})
			}
		}
	}
	slices.SortStableFunc(cells, func(a, b cell) int { return cmp.Compare(b.rem, a.rem) })
	for k := 0; sum < total && k < len(cells); k++ {
		out[cells[k].s][cells[k].c]++
		sum++
	}
	return out
}

// shuffle is a Fisher–Yates shuffle driven by the package's PRNG.
func shuffle(rng *splitMix64, n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, int(rng.uniform(uint64(i)+1)))
	}
}

// Folds makes k entity-disjoint folds for cross-validation: parts <prefix>-<i> made by
// Create with equal ratios, and for each fold i the splits <prefix>-<i>-train (every other
// part) and <prefix>-<i>-val (part i).
func Folds(items []Item, labels []string, k int, prefix string, spec Spec) ([]Made, *Report, error) {
	if k < 2 {
		return nil, nil, fmt.Errorf("%d folds: cross-validation needs at least 2", k)
	}
	spec.Names, spec.Ratios = nil, nil
	for i := range k {
		spec.Names = append(spec.Names, fmt.Sprintf("%s-%d", prefix, i))
		spec.Ratios = append(spec.Ratios, 1)
	}
	for _, n := range spec.Names {
		if err := ValidName(n + "-train"); err != nil {
			return nil, nil, err
		}
	}
	parts, rep, err := Create(items, labels, spec)
	if err != nil {
		return nil, rep, err
	}
	var out []Made
	for i, p := range parts {
		train := Made{Name: p.Name + "-train"}
		for j, q := range parts {
			if j != i {
				train.Members = append(train.Members, q.Members...)
			}
		}
		slices.SortFunc(train.Members, compareIDs)
		out = append(out, train, Made{Name: p.Name + "-val", Members: p.Members})
	}
	return out, rep, nil
}
