package splits

import (
	"slices"
	"strings"
	"testing"
)

func TestParseBalance(t *testing.T) {
	labels := []string{"normal", "tumor"}
	for in, want := range map[string][]float64{"3:1": {3, 1}, "tumor=1, normal=2": {2, 1}} {
		mode, w, err := ParseBalance(in, labels)
		if err != nil || mode != BalanceWeights || !slices.Equal(w, want) {
			t.Errorf("ParseBalance(%q) = %s %v %v", in, mode, w, err)
		}
	}
	if m, _, err := ParseBalance("uniform", labels); err != nil || m != BalanceUniform {
		t.Errorf("uniform: %q, %v", m, err)
	}
}

// FuzzParseBalance: --balance never panics; accepted weights are one per class, and
// anything that is not original or uniform is weights.
func FuzzParseBalance(f *testing.F) {
	for _, s := range []string{"original", "uniform", "3:1", "normal=3,tumor=1", "normal=1", "=", "1:2:3", "normal=x,tumor=1", ":", "NaN:1"} {
		f.Add(s)
	}
	labels := []string{"normal", "tumor"}
	f.Fuzz(func(t *testing.T, s string) {
		mode, w, err := ParseBalance(s, labels)
		if err != nil {
			if !strings.Contains(err.Error(), "--balance") {
				t.Fatalf("ParseBalance(%q): error %v does not name the flag", s, err)
			}
			return
		}
		switch mode {
		case BalanceOriginal, BalanceUniform:
			if w != nil {
				t.Fatalf("ParseBalance(%q) = %s with weights %v", s, mode, w)
			}
		case BalanceWeights:
			if len(w) != len(labels) {
				t.Fatalf("ParseBalance(%q) gave %d weights for %d classes", s, len(w), len(labels))
			}
		default:
			t.Fatalf("ParseBalance(%q) = mode %q", s, mode)
		}
	})
}
