package inflight

import "testing"

// TestBound: slots up to the bound, then refusals; a release tells each user turned away
// once (the last callback it gave), and only those turned away since the last release.
func TestBound(t *testing.T) {
	b := New(2)
	told := map[string]int{}
	tell := func(who string) func() { return func() { told[who]++ } }
	if !b.TryAcquire("a", tell("a")) || !b.TryAcquire("b", tell("b")) {
		t.Fatal("slots within the bound refused")
	}
	for _, who := range []string{"a", "a", "c"} { // a turned away twice: told once
		if b.TryAcquire(who, tell(who)) {
			t.Fatal("a slot beyond the bound taken")
		}
	}
	if got := b.InFlight(); got != 2 {
		t.Errorf("in flight %d, want 2", got)
	}
	b.Release()
	if told["a"] != 1 || told["c"] != 1 || told["b"] != 0 {
		t.Errorf("told %v after a release, want a and c once each", told)
	}
	b.Release()
	if told["a"] != 1 || told["c"] != 1 {
		t.Errorf("told %v after a second release, want nobody again", told)
	}
	if !b.TryAcquire("a", tell("a")) || b.InFlight() != 1 {
		t.Errorf("after two releases: in flight %d, want a slot taken again", b.InFlight())
	}
	if New(0).Max() != 1 {
		t.Error("a bound of 0: want 1")
	}
}
