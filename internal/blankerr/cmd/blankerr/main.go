// Command blankerr runs the blankerr check (make check): go run ./internal/blankerr/cmd/blankerr ./...
package main

import (
	"github.com/cassfs/cassfs/internal/blankerr"
	"golang.org/x/tools/go/analysis/singlechecker"
)

func main() { singlechecker.Main(blankerr.Analyzer) }
