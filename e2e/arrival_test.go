//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
	"time"
)

// TestArrivalReadersThroughLatency: DALI (file_list) and torchvision (ImageFolder with a
// shuffling DataLoader) read a whole epoch correctly under --order arrival over a 20 ms link
// with jitter: every sample exactly once, each with its class's label.
func TestArrivalReadersThroughLatency(t *testing.T) {
	d := sharedDataset(t)
	ln := newLink(t, linkSpec{Name: "arrival", RTT: 20 * time.Millisecond, Jitter: 5 * time.Millisecond})
	m := startMount(t, d.name, append(ln.mountArgs(), "--order", "arrival")...)

	_, items := readDALI(t, d, "--file-list", filepath.Join(m.dir, "all", "epoch-0", "file_list.txt"))
	expectEachOnce(t, d, "DALI under arrival binding", items)
	_, items = readTorchvision(t, d, filepath.Join(m.dir, "all", "epoch-1"))
	expectEachOnce(t, d, "torchvision under arrival binding", items)
}
