package splits

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
)

func isPermutation(p []uint32) bool {
	seen := make([]bool, len(p))
	for _, v := range p {
		if int(v) >= len(p) || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func FuzzPermutationIsPermutation(f *testing.F) {
	f.Add(uint16(0), "all", uint64(0), uint64(0))
	f.Add(uint16(1), "train", uint64(1), uint64(7))
	f.Add(uint16(1000), "val", uint64(42), uint64(1<<40))
	f.Fuzz(func(t *testing.T, n uint16, split string, seed, epoch uint64) {
		p := Permutation(int(n), split, seed, epoch)
		if len(p) != int(n) || !isPermutation(p) {
			t.Fatalf("Permutation(%d, %q, %d, %d) is not a permutation of 0..%d", n, split, seed, epoch, n)
		}
		if !slices.Equal(p, Permutation(int(n), split, seed, epoch)) {
			t.Fatalf("Permutation is not deterministic")
		}
	})
}

func TestEpochsDiffer(t *testing.T) {
	base := Permutation(1000, "all", 0, 0)
	for _, other := range [][]uint32{
		Permutation(1000, "all", 0, 1),
		Permutation(1000, "all", 1, 0),
		Permutation(1000, "train", 0, 0),
	} {
		if slices.Equal(base, other) {
			t.Errorf("two different (split, seed, epoch) gave the same order")
		}
	}
}

// TestPermutationIsUniform: over many epochs, each element lands in each position about
// equally often (chi-square-like bound, loose enough never to flake: the expected count is
// 2000 and a deviation of 400 is over 9 standard deviations).
func TestPermutationIsUniform(t *testing.T) {
	const n, epochs = 8, 16000
	var counts [n][n]int
	for e := range uint64(epochs) {
		for pos, v := range Permutation(n, "u", 3, e) {
			counts[v][pos]++
		}
	}
	for v := range n {
		for pos := range n {
			if c := counts[v][pos]; c < epochs/n-400 || c > epochs/n+400 {
				t.Errorf("element %d at position %d %d times in %d epochs, want about %d", v, pos, c, epochs, epochs/n)
			}
		}
	}
}

// TestPermutationMatchesReference runs the Python reference implementation from
// docs/epoch-order.md and requires the same orders, so the documented definition is the
// implemented one.
func TestPermutationMatchesReference(t *testing.T) {
	doc, err := os.ReadFile("../docs/epoch-order.md")
	if err != nil {
		t.Fatal(err)
	}
	var code string
	for _, m := range regexp.MustCompile("(?s)```python\n(.*?)```").FindAllSubmatch(doc, -1) {
		code += string(m[1]) + "\n"
	}
	if code == "" {
		t.Fatal("no Python reference in docs/epoch-order.md")
	}
	type tc struct {
		N     int    `json:"n"`
		Split string `json:"split"`
		Seed  uint64 `json:"seed"`
		Epoch uint64 `json:"epoch"`
	}
	cases := []tc{{10, "all", 0, 0}, {10, "all", 1, 0}, {257, "train", 42, 3}, {1, "x", 0, 0}, {1000, "val", 18446744073709551615, 99}}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	// Each case also takes rank 2 of 3 (plain and padded) of its order.
	script := code + `
import json, sys
out = []
for c in json.loads(sys.argv[1]):
    p = permutation(c["n"], c["split"], c["seed"], c["epoch"])
    out += [p, shard(p, 2 % max(1, c["n"]), 3), shard(p, 2, 3, pad=True)]
print(json.dumps(out))
`
	out, err := exec.Command("python3", "-c", script, string(in)).Output()
	if err != nil {
		t.Fatalf("python3 reference: %v", err)
	}
	var want [][]uint32
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for k, c := range cases {
		got := Permutation(c.N, c.Split, c.Seed, c.Epoch)
		if !slices.Equal(got, want[3*k]) {
			t.Errorf("Permutation(%+v) differs from the documented reference", c)
		}
		plain := Shard{Rank: 2 % max(1, c.N), Count: 3}
		if s := plain.Take(got); !slices.Equal(s, want[3*k+1]) {
			t.Errorf("%+v: shard %+v = %v, the reference says %v", c, plain, s, want[3*k+1])
		}
		if s := (Shard{Rank: 2, Count: 3, Pad: true}).Take(got); !slices.Equal(s, want[3*k+2]) {
			t.Errorf("%+v: padded shard 2/3 = %v, the reference says %v", c, s, want[3*k+2])
		}
	}
}
