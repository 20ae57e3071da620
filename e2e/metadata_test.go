//go:build e2e

package e2e

import (
	"encoding/csv"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMetadataOnFiles: every file of a mount carries its sample's id, name, checksum and
// metadata as extended attributes. getfattr -d shows them; a Python reader groups one
// epoch's tiles by patient_id with os.getxattr and the counts equal the source CSV's; the
// split's samples.csv joins with file_list.txt by name. Under arrival binding (the default,
// with prefetching on) the attributes describe the sample the name was bound to.
func TestMetadataOnFiles(t *testing.T) {
	d := sharedDataset(t)
	f, err := os.Open(filepath.Join(sharedDir, "metadata.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for k, h := range recs[0] {
		col[h] = k
	}
	perPatient := map[string]int{}
	byPath := map[string][]string{}
	for _, r := range recs[1:] {
		perPatient[r[col["patient_id"]]]++
		byPath[r[col["path"]]] = r
	}

	m := startMount(t, d.name)
	epoch := filepath.Join(m.dir, "all", "epoch-0")
	var got struct {
		Files          int            `json:"files"`
		Rows           int            `json:"rows"`
		Patients       map[string]int `json:"patients"`
		Joined         int            `json:"joined"`
		UUIDMatches    int            `json:"uuid_matches"`
		ContentMatches int            `json:"content_matches"`
		Listxattr      []string       `json:"listxattr"`
	}
	runPython(t, &got, "xattr_groups.py", epoch, filepath.Join(m.dir, "all", "samples.csv"))
	if got.Files != sharedCount || got.Rows != sharedCount {
		t.Fatalf("%d files in the epoch, %d rows in samples.csv; want %d", got.Files, got.Rows, sharedCount)
	}
	if !maps.Equal(got.Patients, perPatient) {
		t.Errorf("tiles per patient by os.getxattr: %v\nthe source CSV: %v", got.Patients, perPatient)
	}
	if got.Joined != sharedCount || got.UUIDMatches != sharedCount || got.ContentMatches != sharedCount {
		t.Errorf("of %d files: %d joined samples.csv by name, %d carried their row's uuid and checksum, %d the checksum of their content",
			sharedCount, got.Joined, got.UUIDMatches, got.ContentMatches)
	}
	for _, want := range []string{"user.cassfs.uuid", "user.cassfs.label", "user.cassfs.sha256", "user.patient_id", "user.slide", "user.x", "user.y"} {
		if !slices.Contains(got.Listxattr, want) {
			t.Errorf("os.listxattr = %q, lacks %s", got.Listxattr, want)
		}
	}

	// getfattr -d, as a user would look at one file: its own metadata from the source CSV.
	names, _ := fileList(t, epoch)
	out, err := exec.Command("getfattr", "-d", filepath.Join(epoch, names[7])).CombinedOutput()
	if err != nil {
		t.Fatalf("getfattr -d: %v\n%s", err, out)
	}
	attrs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(user\.[a-z0-9_.]+)="(.*)"$`).FindAllStringSubmatch(string(out), -1) {
		attrs[m[1]] = m[2]
	}
	src, ok := byPath[attrs["user.cassfs.name"]]
	if !ok {
		t.Fatalf("getfattr -d shows no known user.cassfs.name:\n%s", out)
	}
	for _, c := range []string{"patient_id", "slide", "x", "y"} {
		if attrs["user."+c] != src[col[c]] {
			t.Errorf("getfattr: user.%s = %q, the source CSV has %q\n%s", c, attrs["user."+c], src[col[c]], out)
		}
	}
	if attrs["user.cassfs.sha256"] != d.sha[attrs["user.cassfs.name"]] || !strings.Contains(string(out), "user.cassfs.uuid=") {
		t.Errorf("getfattr: checksum or uuid wrong:\n%s", out)
	}
}
