package a

import (
	"os"
	"strconv"
	"testing"
)

func TestA(t *testing.T) {
	n, _ := strconv.Atoi("1") // want `an error assigned to _ in a test`
	_ = os.Remove("x")        // want `an error assigned to _ in a test`
	var err error
	_ = err // want `an error assigned to _ in a test`
	m, ok := map[int]int{}[n]
	_, _ = m, ok
	if _, err := strconv.Atoi("2"); err != nil {
		t.Fatal(err)
	}
}
