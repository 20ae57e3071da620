package splits

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cassfs/cassfs/internal/testkit"
	"github.com/google/uuid"
)

// cohort generates tiles of patients and slides with imbalanced classes: most patients
// have only "normal" tiles, some have mostly "tumor" ones; patients differ in size.
func cohort(patients int, seed uint64) ([]Item, []string) {
	r := rand.New(rand.NewPCG(seed, 1))
	labels := []string{"normal", "tumor"}
	var items []Item
	for p := range patients {
		tumorous := r.IntN(4) == 0
		for s := range 1 + r.IntN(3) {
			for t := range 5 + r.IntN(40) {
				label := 0
				if tumorous && r.IntN(10) < 7 {
					label = 1
				}
				items = append(items, Item{
					ID:    uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/%d/%d", p, s, t)),
					Label: label,
					Group: fmt.Sprintf("patient%03d", p),
				})
			}
		}
	}
	return items, labels
}

func groupOf(items []Item) map[uuid.UUID]Item {
	m := map[uuid.UUID]Item{}
	for _, it := range items {
		m[it.ID] = it
	}
	return m
}

// checkDisjoint checks that made holds known, distinct samples and that no group is in two
// splits; it returns each split's count per label.
func checkDisjoint(t *testing.T, items []Item, made []Made, nc int) [][]int {
	t.Helper()
	byID := groupOf(items)
	seen := map[uuid.UUID]bool{}
	groupSplit := map[string]string{}
	out := make([][]int, len(made))
	for s, m := range made {
		out[s] = make([]int, nc)
		if !slices.IsSortedFunc(m.Members, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }) {
			t.Errorf("split %s: members not ascending", m.Name)
		}
		for _, id := range m.Members {
			it, ok := byID[id]
			if !ok {
				t.Fatalf("split %s holds unknown sample %s", m.Name, id)
			}
			if seen[id] {
				t.Fatalf("sample %s is in two splits", id)
			}
			seen[id] = true
			if other, ok := groupSplit[it.Group]; ok && other != m.Name {
				t.Fatalf("group %s is in splits %s and %s", it.Group, other, m.Name)
			}
			groupSplit[it.Group] = m.Name
			out[s][it.Label]++
		}
	}
	return out
}

func TestCreateOriginalBalance(t *testing.T) {
	items, labels := cohort(120, 1)
	spec := Spec{Names: []string{"train", "val", "test"}, Ratios: []float64{7, 2, 1}, Seed: 3}
	made, rep, err := Create(items, labels, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := checkDisjoint(t, items, made, 2)
	total := 0
	for _, m := range made {
		total += len(m.Members)
	}
	if total != len(items) {
		t.Errorf("original balance without a cap uses %d of %d samples, want all", total, len(items))
	}
	tumorShare := 0.0
	for _, it := range items {
		tumorShare += float64(it.Label)
	}
	tumorShare /= float64(len(items))
	for s, want := range []float64{0.7, 0.2, 0.1} {
		got := float64(len(made[s].Members)) / float64(total)
		if math.Abs(got-want) > 0.05 {
			t.Errorf("split %s: ratio %.3f, want %.1f ± 0.05", made[s].Name, got, want)
		}
		if share := float64(counts[s][1]) / float64(len(made[s].Members)); math.Abs(share-tumorShare) > 0.1 {
			t.Errorf("split %s: tumor share %.3f, dataset's %.3f (± 0.1)", made[s].Name, share, tumorShare)
		}
		if rep.Splits[s].Size != len(made[s].Members) || !slices.Equal(rep.Splits[s].ByClass, counts[s]) {
			t.Errorf("report of %s says %d samples %v, split has %d %v", made[s].Name, rep.Splits[s].Size, rep.Splits[s].ByClass, len(made[s].Members), counts[s])
		}
	}
	if rep.SharedGroups != 0 || rep.Groups != 120 {
		t.Errorf("report: %d shared groups of %d, want 0 of 120", rep.SharedGroups, rep.Groups)
	}
}

func TestCreateUniformBalanceWithCap(t *testing.T) {
	items, labels := cohort(200, 2)
	spec := Spec{Names: []string{"train", "val"}, Ratios: []float64{4, 1}, Balance: BalanceUniform, MaxSamples: 1500, Seed: 9}
	made, rep, err := Create(items, labels, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := checkDisjoint(t, items, made, 2)
	total := len(made[0].Members) + len(made[1].Members)
	if total > 1500 || total < 1350 {
		t.Errorf("cap 1500: got %d samples, want 1350..1500", total)
	}
	for s := range made {
		if d := counts[s][0] - counts[s][1]; d < -1 || d > 1 {
			t.Errorf("split %s: uniform balance gave %v", made[s].Name, counts[s])
		}
	}
	if r := float64(len(made[0].Members)) / float64(total); math.Abs(r-0.8) > 0.05 {
		t.Errorf("train ratio %.3f, want 0.8 ± 0.05", r)
	}
	if rep.Asked != 1500 {
		t.Errorf("report: asked %d, want 1500", rep.Asked)
	}
}

func TestCreateWeights(t *testing.T) {
	items, labels := cohort(200, 4)
	spec := Spec{Names: []string{"a", "b"}, Ratios: []float64{1, 1}, Balance: BalanceWeights, Weights: []float64{3, 1}, Seed: 1}
	made, _, err := Create(items, labels, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := checkDisjoint(t, items, made, 2)
	for s := range made {
		if r := float64(counts[s][0]) / float64(counts[s][1]); math.Abs(r-3) > 0.1 {
			t.Errorf("split %s: normal:tumor = %v, want 3:1", made[s].Name, counts[s])
		}
	}
}

func TestCreateIsDeterministic(t *testing.T) {
	items, labels := cohort(80, 5)
	spec := Spec{Names: []string{"train", "val", "test"}, Ratios: []float64{7, 2, 1}, Balance: BalanceUniform, Seed: 42, AcceptShortfall: true}
	a, _, err := Create(items, labels, spec)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(items)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, _, err := Create(shuffled, labels, spec)
	testkit.Check(t, err)
	spec.Seed = 43
	c, _, err := Create(items, labels, spec)
	testkit.Check(t, err)
	for s := range a {
		if !slices.Equal(a[s].Members, b[s].Members) {
			t.Errorf("split %s differs between two runs with the same seed (items in another order)", a[s].Name)
		}
	}
	if slices.Equal(a[0].Members, c[0].Members) {
		t.Error("seeds 42 and 43 gave the same train split")
	}
}

func TestCreateGroupsAreEntities(t *testing.T) {
	// Grouping by patient and slide: finer groups, still never shared.
	items, labels := cohort(30, 6)
	for k := range items {
		items[k].Group += "/" + strings.Repeat("s", k%2)
	}
	made, rep, err := Create(items, labels, Spec{Names: []string{"x", "y", "z"}, Ratios: []float64{1, 1, 1}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkDisjoint(t, items, made, 2)
	if rep.Groups != 60 {
		t.Errorf("%d groups, want 60", rep.Groups)
	}
	for _, s := range rep.Splits {
		if s.Groups == 0 {
			t.Errorf("split %s got no group", s.Name)
		}
	}
}

func TestCreateBadInput(t *testing.T) {
	items, labels := cohort(10, 7)
	one := []Item{{ID: uuid.New(), Label: 0, Group: "p"}}
	for _, tc := range []struct {
		name  string
		items []Item
		spec  Spec
		want  string
	}{
		{"names and ratios differ", items, Spec{Names: []string{"a", "b"}, Ratios: []float64{1}}, "one ratio per name"},
		{"zero ratios", items, Spec{Names: []string{"a", "b"}, Ratios: []float64{0, 0}}, "sum to zero"},
		{"negative ratio", items, Spec{Names: []string{"a", "b"}, Ratios: []float64{1, -1}}, "non-negative"},
		{"duplicate name", items, Spec{Names: []string{"a", "a"}, Ratios: []float64{1, 1}}, "given twice"},
		{"reserved name", items, Spec{Names: []string{"all"}, Ratios: []float64{1}}, "reserved"},
		{"bad name", items, Spec{Names: []string{"a/b"}, Ratios: []float64{1}}, "invalid split name"},
		{"more splits than groups", one, Spec{Names: []string{"a", "b"}, Ratios: []float64{1, 1}}, "only 1 groups"},
		{"weights count", items, Spec{Names: []string{"a"}, Ratios: []float64{1}, Balance: BalanceWeights, Weights: []float64{1}}, "one weight per class"},
		{"unknown balance", items, Spec{Names: []string{"a"}, Ratios: []float64{1}, Balance: "even"}, "use original, uniform"},
		{"weight on empty class", one, Spec{Names: []string{"a"}, Ratios: []float64{1}, Balance: BalanceWeights, Weights: []float64{1, 1}}, `"tumor" has weight 1 but no samples`},
		{"no samples", nil, Spec{Names: []string{"a"}, Ratios: []float64{1}}, "no samples"},
	} {
		_, _, err := Create(tc.items, labels, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestCreateShortfall(t *testing.T) {
	// Tumor tiles all come from one patient, so only one split can have any: a uniform
	// balance cannot hold in the other, and Create says what it would achieve.
	var items []Item
	for p := range 10 {
		for k := range 20 {
			label := 0
			if p == 0 {
				label = 1
			}
			items = append(items, Item{ID: uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "%d-%d", p, k)), Label: label, Group: fmt.Sprint(p)})
		}
	}
	labels := []string{"normal", "tumor"}
	spec := Spec{Names: []string{"train", "val"}, Ratios: []float64{1, 1}, Balance: BalanceUniform, Seed: 1}
	_, rep, err := Create(items, labels, spec)
	var se *ShortfallError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "100% short") || !strings.Contains(err.Error(), "--accept-shortfall") {
		t.Fatalf("got %v, want a shortfall error naming the split", err)
	}
	if rep == nil || len(rep.Splits) != 2 {
		t.Fatal("a shortfall error comes with the report of what was achieved")
	}
	spec.AcceptShortfall = true
	made, _, err := Create(items, labels, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := checkDisjoint(t, items, made, 2)
	for s := range made {
		if counts[s][0] != counts[s][1] {
			t.Errorf("split %s keeps the balance when short: %v", made[s].Name, counts[s])
		}
	}
}

func TestFolds(t *testing.T) {
	items, labels := cohort(50, 8)
	made, _, err := Folds(items, labels, 5, "cv", Spec{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 10 {
		t.Fatalf("5 folds gave %d splits, want 10", len(made))
	}
	var vals []Made
	for i := range 5 {
		train, val := made[2*i], made[2*i+1]
		if train.Name != fmt.Sprintf("cv-%d-train", i) || val.Name != fmt.Sprintf("cv-%d-val", i) {
			t.Errorf("fold %d named %s, %s", i, train.Name, val.Name)
		}
		checkDisjoint(t, items, []Made{train, val}, 2)
		if len(train.Members)+len(val.Members) != len(items) {
			t.Errorf("fold %d: train+val hold %d samples, want all %d", i, len(train.Members)+len(val.Members), len(items))
		}
		vals = append(vals, val)
	}
	checkDisjoint(t, items, vals, 2) // the validation parts partition the dataset
	if _, _, err := Folds(items, labels, 1, "cv", Spec{}); err == nil {
		t.Error("1 fold accepted")
	}
}

func TestParseRatios(t *testing.T) {
	for in, want := range map[string][]float64{"7:2:1": {7, 2, 1}, "0.7,0.3": {0.7, 0.3}, "1": {1}} {
		if got, err := ParseRatios(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseRatios(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "7:x", "0:0", "-1:2", "1::2", "NaN:1", "Inf:1"} {
		if _, err := ParseRatios(in); err == nil {
			t.Errorf("ParseRatios(%q) accepted", in)
		}
	}
}

func FuzzParseRatios(f *testing.F) {
	for _, s := range []string{"7:2:1", "1,1", "0:0", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRatios(s)
		if err != nil {
			return
		}
		sum := 0.0
		for _, v := range r {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("ParseRatios(%q) gave %v", s, r)
			}
			sum += v
		}
		if sum <= 0 {
			t.Fatalf("ParseRatios(%q) gave ratios summing to %v", s, sum)
		}
	})
}

// BenchmarkCreate: ImageNet-sized, 1,000 classes, grouped by 20,000 entities and, the
// worst case for grouping, every sample on its own.
func BenchmarkCreate(b *testing.B) {
	const n, classes = 1_000_000, 1000
	labels := make([]string, classes)
	for c := range labels {
		labels[c] = fmt.Sprintf("c%04d", c)
	}
	for _, groups := range []int{20_000, n} {
		items := make([]Item, n)
		for i := range items {
			id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d", i))
			g := string(id[:])
			if groups < n {
				g = fmt.Sprint(i % groups)
			}
			items[i] = Item{ID: id, Label: i % classes, Group: g}
		}
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			for range b.N {
				if _, _, err := Create(items, labels, Spec{Names: []string{"train", "val", "test"}, Ratios: []float64{8, 1, 1}, Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCreateMeetsTargetsAcrossSeeds: on imbalanced cohorts where a quarter of the patients
// hold the minority class, every split stays within 5% of its asked size, in both
// balances and for several seeds (dealing groups in the seeded order alone left splits up
// to 21% short here).
func TestCreateMeetsTargetsAcrossSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		items, labels := cohort(120, seed)
		for _, b := range []string{BalanceOriginal, BalanceUniform} {
			_, rep, err := Create(items, labels, Spec{Names: []string{"train", "val", "test"}, Ratios: []float64{7, 2, 1}, Seed: 3, Balance: b})
			if err != nil {
				t.Errorf("cohort %d, %s balance: %v", seed, b, err)
				continue
			}
			for _, s := range rep.Splits {
				if d := math.Abs(float64(s.Size-s.AskedSize)) / float64(s.AskedSize); d > 0.05 {
					t.Errorf("cohort %d, %s balance: split %s holds %d samples, asked %d", seed, b, s.Name, s.Size, s.AskedSize)
				}
			}
		}
	}
}
