package blankerr_test

import (
	"testing"

	"github.com/cassfs/cassfs/internal/blankerr"
	"golang.org/x/tools/go/analysis/analysistest"
)

// TestAnalyzer: errors assigned to _ in tests are reported, other blanks and product code
// are not (testdata/src/a: each "want" comment is a report expected on its line).
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), blankerr.Analyzer, "a")
}
