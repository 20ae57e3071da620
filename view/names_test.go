package view

import (
	"slices"
	"strconv"
	"testing"

	"github.com/cassfs/cassfs/splits"
)

// FuzzEpochNames: an epoch directory name parses only in its canonical form, and the
// parsed numbers print back to the same name.
func FuzzEpochNames(f *testing.F) {
	for _, s := range []string{"epoch-0", "epoch-12", "epoch-3@40", "epoch-03", "epoch-3@", "epoch-@1", "epoch-1@+2", "epoch-18446744073709551615", "epoch-1@4294967296", "all", "epoch-1@2@3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, start, ok := ParseEpochName(name)
		if !ok {
			return
		}
		back := "epoch-" + strconv.FormatUint(n, 10)
		if start > 0 || len(name) > len(back) {
			back += "@" + strconv.FormatUint(uint64(start), 10)
		}
		if back != name {
			t.Fatalf("ParseEpochName(%q) = %d, %d: prints back as %q", name, n, start, back)
		}
	})
}

// FuzzEntryNames: a sample entry's position prefix parses back to the position it was
// made from, for any width, and garbage never parses.
func FuzzEntryNames(f *testing.F) {
	f.Add(uint32(0), uint8(1), "a.jpg")
	f.Add(uint32(4294967295), uint8(10), "tile 0001.png")
	f.Add(uint32(7), uint8(4), "ünï_cöde.jpg")
	f.Fuzz(func(t *testing.T, pos uint32, width uint8, rest string) {
		w := int(width%12) + 1
		if len(strconv.FormatUint(uint64(pos), 10)) > w || rest == "" {
			return // not a name the filesystem makes at this width
		}
		name := padInt(uint64(pos), w) + "_" + rest
		got, ok := ParseEntryPos(name, w)
		if !ok || got != pos {
			t.Fatalf("ParseEntryPos(%q, %d) = %d, %v; want %d", name, w, got, ok, pos)
		}
	})
}

func TestClassNames(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{[]string{"b", "a"}, []string{"0_b", "1_a"}},
		{[]string{"x", ".hidden", "y"}, []string{"0_x", "1_class", "2_y"}},
		{make([]string, 11), nil},
	} {
		got := ClassNames(tc.in)
		if tc.want == nil {
			if got[0] != "00_class" || got[10] != "10_class" {
				t.Errorf("ClassNames(11 empty) = %q", got)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ClassNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzLookup: in any view (split size, seed, epoch, resume point), a name resolves in a
// class directory only if it is exactly the entry name of a position of that class in the
// view, and then to that position's sample (strict binding); every listed name resolves.
func FuzzLookup(f *testing.F) {
	f.Add(uint16(30), uint64(1), uint64(0), uint16(0), uint8(0), "")
	f.Add(uint16(1000), uint64(7), uint64(3), uint16(990), uint8(2), "07_img 0001.jpg")
	f.Add(uint16(5), uint64(0), uint64(9), uint16(5), uint8(1), "0_x")
	f.Fuzz(func(t *testing.T, n uint16, seed, epoch uint64, start uint16, label uint8, name string) {
		ix := testIndex(t, int(n%2000)+1, []string{"a", "b", "c"})
		set := New(Config{Index: ix, Splits: []*splits.Split{splits.All(ix)}, Seed: seed})
		key, ok := set.EpochKey("all", "epoch-"+strconv.FormatUint(epoch, 10)+"@"+strconv.Itoa(int(start)))
		if !ok {
			if int(start) <= ix.Len() {
				t.Fatalf("epoch-%d@%d of %d samples did not resolve", epoch, start, ix.Len())
			}
			return
		}
		e := set.Epoch(key)
		l := int(label % 3)
		byName := map[string]uint32{}
		for _, k := range e.ByClass[l] {
			byName[e.EntryName(k)] = e.Order[k]
		}
		for entry, want := range byName {
			if i, ok := set.Lookup(e, l, entry); !ok || i != want {
				t.Fatalf("listed %q resolved to %d, %v; want %d", entry, i, ok, want)
			}
		}
		i, ok := set.Lookup(e, l, name)
		if want, listed := byName[name]; ok != listed || (ok && i != want) {
			t.Fatalf("Lookup(%q) in class %d = %d, %v; listed: %v (sample %d)", name, l, i, ok, listed, want)
		}
	})
}
