//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cassfs/cassfs/store/cassandra"
	"github.com/google/uuid"
)

// A JVM compiles its hot code while it serves, and compiles parts of it again when what it
// serves changes: a keyspace just created and written, a kind of query not seen before.
// On two cores that compilation lands on whichever pass of a benchmark happens to meet it:
// a Cassandra node warmed by dozens of passes still spent 0.7 s of a pass in its C2
// compiler after a dataset was ingested, and a fresh node spent a third of its CPU per
// file compiling for the first fifteen passes (bench/history/journal.md, "the database's
// CPU without its compiler"). So the benchmarks charge the database with its process's CPU
// less its compiler threads', and report the compiler's apart where a figure is compared.

// jvmCPU is the CPU time process pid, a JVM, has used so far: all of it, and that of its
// JIT compiler threads ("C1 CompilerThread0", "C2 CompilerThread0", ...; the kernel keeps
// 15 bytes of a thread's name). Compiler threads a JVM adds under load (more than one per
// tier, -XX:CICompilerCount above 2) and ends later take their time with them: a pass in
// which one ends counts the time it compiled in the total only.
func jvmCPU(b *testing.B, pid int) (total, jit time.Duration) {
	b.Helper()
	total = processCPU(b, pid)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			b.Fatalf("%s: %q", t, stat)
		}
		if name := string(stat[open+1 : end]); !strings.HasPrefix(name, "C1 Compiler") && !strings.HasPrefix(name, "C2 Compiler") {
			continue
		}
		jit += statCPU(b, t, stat)
	}
	return total, jit
}

// nodeCPU is the CPU time the Cassandra node pid has used so far serving, its JIT
// compiler's left out (see jvmCPU).
func nodeCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	total, jit := jvmCPU(b, pid)
	return total - jit
}

// warmDatabase reads every blob of ids from st, one id per query and in blocks by turns,
// until the database's JIT compilers took under a twentieth of its CPU in two passes in a
// row, and returns how many passes that took (at most 40; a pass from a warm page cache
// takes about a second). A node just started compiled through fifteen passes of 4,000
// blobs, and a warm one compiled again for a keyspace just written: passes measured
// before it settles are charged for the compiler's CPU, which the readers' passes then
// lack.
func warmDatabase(b *testing.B, st *cassandra.Store, ids []uuid.UUID) int {
	b.Helper()
	const most = 40
	calm := 0
	for k := 1; k <= most; k++ {
		serving0, jit0 := databaseCPU(b), databaseJIT(b)
		if k%2 == 1 {
			getAll(b, st, ids, 16)
		} else {
			getBlocks(b, st, ids, 16, 8)
		}
		if serving, jit := databaseCPU(b)-serving0, databaseJIT(b)-jit0; 20*jit < serving {
			calm++
		} else {
			calm = 0
		}
		if calm == 2 {
			return k
		}
	}
	b.Logf("the database's JIT compiler was still busy after %d passes over %d blobs: measuring anyway", most, len(ids))
	return most
}
