package attach

import (
	"strings"
	"testing"
)

// table builds a Table from "name type" pairs; the first column is the partition key
// unless pk names others.
func table(name string, cols []string, pk ...string) Table {
	t := Table{Keyspace: "ks", Name: name}
	if len(pk) == 0 {
		pk = []string{strings.Fields(cols[0])[0]}
	}
	for _, c := range cols {
		f := strings.Fields(c)
		col := Column{Name: f[0], Type: f[1], Kind: "regular"}
		for i, p := range pk {
			if p == col.Name {
				col.Kind, col.Position = "partition_key", i
			}
		}
		if len(f) > 2 && f[2] == "clustering" {
			col.Kind = "clustering"
		}
		t.Columns = append(t.Columns, col)
	}
	return t
}

func TestFindDataColumns(t *testing.T) {
	plugin := table("data_train", []string{"id uuid", "label int", "data blob"})
	cdl := table("data_by_uuid", []string{"patch_id uuid", "label int", "data blob"})
	for _, c := range []struct {
		name                   string
		t                      Table
		want                   Columns
		id, data, label, named string
		meta                   []string
	}{
		{name: "the DALI plugin's data table", t: plugin, id: "id", data: "data", label: "label"},
		{name: "CassandraDL's data_by_uuid", t: cdl, id: "patch_id", data: "data", label: "label"},
		{name: "no label column: one class", t: table("d", []string{"id uuid", "img blob"}), id: "id", data: "img"},
		{name: "--no-label ignores the label", t: plugin, want: Columns{NoLabel: true}, id: "id", data: "data"},
		{name: "timeuuid id", t: table("d", []string{"id timeuuid", "data blob"}), id: "id", data: "data"},
		{name: "two blobs, one named", t: table("d", []string{"id uuid", "data blob", "mask blob"}), want: Columns{Data: "data"}, id: "id", data: "data"},
		{name: "label named", t: table("d", []string{"id uuid", "data blob", "label int", "gleason int"}), want: Columns{Label: "gleason"}, id: "id", data: "data", label: "gleason", meta: []string{"label"}},
		{name: "a name column and metadata", t: table("d", []string{"id uuid", "data blob", "filename text", "slide int"}), want: Columns{Name: "filename"}, id: "id", data: "data", named: "filename", meta: []string{"slide"}},
	} {
		d, err := findDataColumns(c.t, c.want)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d.id != c.id || d.data != c.data || d.label != c.label || d.name != c.named || strings.Join(d.meta, ",") != strings.Join(c.meta, ",") {
			t.Errorf("%s: got id %q data %q label %q name %q meta %q, want %q %q %q %q %q", c.name, d.id, d.data, d.label, d.name, d.meta, c.id, c.data, c.label, c.named, c.meta)
		}
	}
}

// TestDataTableRefusals pins that a table that cannot work is refused with an error
// naming the table, the column and what would work.
func TestDataTableRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Table
		want Columns
		says []string
	}{
		{"text partition key", table("d", []string{"path text", "data blob"}), Columns{},
			[]string{"ks.d", "partition key path is text", "uuid partition key"}},
		{"composite partition key", table("metadata_by_nat", []string{"patient_id text", "slide_num int", "data blob"}, "patient_id", "slide_num"), Columns{},
			[]string{"ks.metadata_by_nat", "(patient_id, slide_num) is composite", "one uuid column"}},
		{"clustering columns", table("d", []string{"id uuid", "x int clustering", "data blob"}), Columns{},
			[]string{"ks.d", "clustering columns (x)", "one row per id"}},
		{"no blob", table("d", []string{"id uuid", "label int", "path text"}), Columns{},
			[]string{"ks.d", "no blob column", "id, label, path"}},
		{"two blobs", table("d", []string{"id uuid", "data blob", "mask blob"}), Columns{},
			[]string{"ks.d", "several blob columns (data, mask)", "--data-column"}},
		{"named data not a blob", table("d", []string{"id uuid", "data blob", "path text"}), Columns{Data: "path"},
			[]string{"--data-column path is text", "blob columns: data"}},
		{"named data missing", table("d", []string{"id uuid", "data blob"}), Columns{Data: "image"},
			[]string{"no column image (--data-column)", "blob columns: data"}},
		{"label not int", table("d", []string{"id uuid", "label text", "data blob"}), Columns{},
			[]string{"ks.d", "label column label is text", "int column", "--label-column", "--no-label"}},
		{"named label missing", table("d", []string{"id uuid", "label int", "data blob"}), Columns{Label: "grade"},
			[]string{"no column grade (--label-column)", "int columns: label"}},
		{"id not the partition key", table("d", []string{"id uuid", "other uuid", "data blob"}), Columns{ID: "other"},
			[]string{"--id-column other is not its partition key", "id (uuid)"}},
		{"name column not text", table("d", []string{"id uuid", "data blob", "n int"}), Columns{Name: "n"},
			[]string{"--name-column n is int", "text column"}},
	} {
		_, err := findDataColumns(c.t, c.want)
		if err == nil {
			t.Errorf("%s: got no error, want one saying %q", c.name, c.says)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: got %q, want it to say %q", c.name, err, s)
			}
		}
	}
}

func TestFindMetaColumns(t *testing.T) {
	plugin := table("metadata_train", []string{"id uuid", "label int", "or_label text", "or_split text"})
	cdl := table("metadata_by_uuid", []string{"patient_id text", "slide_num int", "x int", "y int", "label int", "patch_id uuid"}, "patch_id")
	for _, c := range []struct {
		name           string
		t              Table
		want           MetaColumns
		dataID         string
		id, label, cls string
		cols           string
		says           string // an error, if set
	}{
		{name: "the DALI plugin's metadata", t: plugin, dataID: "id", id: "id", label: "label", cols: "or_label,or_split"},
		{name: "CassandraDL's metadata_by_uuid", t: cdl, dataID: "patch_id", id: "patch_id", label: "label", cols: "patient_id,slide_num,x,y"},
		{name: "joined on its uuid key whatever the data table calls it", t: cdl, dataID: "id", id: "patch_id", label: "label", cols: "patient_id,slide_num,x,y"},
		{name: "class column named", t: plugin, want: MetaColumns{Class: "or_label"}, dataID: "id", id: "id", label: "label", cls: "or_label", cols: "or_split"},
		{name: "no uuid column", t: table("m", []string{"k text", "v text"}), dataID: "id", says: "metadata table ks.m: no uuid column to join with the data table's id"},
		{name: "two uuid columns, neither the id", t: table("m", []string{"k text", "a uuid", "b uuid"}), dataID: "id", says: "several uuid columns (a, b) and none is named id; name the one holding the data table's ids with --metadata-id-column"},
		{name: "class column not text", t: plugin, want: MetaColumns{Class: "label"}, dataID: "id", says: "--class-column label is not a text column of it (its text columns: or_label, or_split)"},
		{name: "reserved column name", t: table("m", []string{"id uuid", "size int"}), dataID: "id", says: `column size cannot be a metadata column`},
	} {
		m, err := findMetaColumns(c.t, c.want, c.dataID)
		switch {
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: got error %v, want one saying %q", c.name, err, c.says)
		case c.says == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.says == "" && (m.id != c.id || m.label != c.label || m.class != c.cls || strings.Join(m.cols, ",") != c.cols):
			t.Errorf("%s: got id %q label %q class %q cols %q, want %q %q %q %q", c.name, m.id, m.label, m.class, m.cols, c.id, c.label, c.cls, c.cols)
		}
	}
}

func TestClassColumn(t *testing.T) {
	for _, c := range []struct {
		name     string
		cands    []string
		conflict map[string]bool
		want     string
		says     string
	}{
		{"one candidate", []string{"or_label"}, nil, "or_label", ""},
		{"conflicting candidate", []string{"patient_id"}, map[string]bool{"patient_id": true}, "", ""},
		{"the label-named one of two", []string{"or_label", "or_split"}, nil, "or_label", ""},
		{"two unnamed", []string{"a", "b"}, nil, "", "several text columns have one value per label (a, b)"},
	} {
		got, err := classColumn("ks.m", c.cands, c.conflict)
		switch {
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: got error %v, want one saying %q", c.name, err, c.says)
		case c.says == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %q, %v, want %q", c.name, got, err, c.want)
		}
	}
}

func TestParseTableName(t *testing.T) {
	for _, c := range []struct {
		in   string
		want TableName
		bad  bool
	}{
		{in: "ks.data_train", want: TableName{Keyspace: "ks", Table: "data_train"}},
		{in: "train=imagenette.data_train", want: TableName{Split: "train", Keyspace: "imagenette", Table: "data_train"}},
		{in: "KS.Data", want: TableName{Keyspace: "ks", Table: "data"}},
		{in: "data_train", bad: true},
		{in: "a.b.c", bad: true},
		{in: "all=ks.t", bad: true},
		{in: "=ks.t", bad: true},
	} {
		got, err := ParseTableName(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("%q: got %+v, %v; want %+v (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
}
