package attach

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cassfs/cassfs/store"
)

// Table is a table as the database's schema describes it.
type Table = store.Table

// Column is one column of a Table.
type Column = store.Column

// partitionKey returns the partition key's columns in order.
func partitionKey(t Table) []Column {
	var pk []Column
	for _, n := range t.PartitionKey() {
		c, _ := t.Column(n)
		pk = append(pk, c)
	}
	return pk
}

func ofType(t Table, types ...string) []string {
	var names []string
	for _, c := range t.Columns {
		if slices.Contains(types, c.Type) {
			names = append(names, c.Name)
		}
	}
	return names
}

var (
	intTypes  = []string{"int", "smallint", "tinyint"}
	textTypes = []string{"text", "varchar", "ascii"}
	uuidTypes = []string{"uuid", "timeuuid"}
	// metaTypes are the column types whose values become metadata, as text.
	metaTypes = []string{"text", "varchar", "ascii", "int", "smallint", "tinyint", "bigint", "varint",
		"float", "double", "decimal", "boolean", "uuid", "timeuuid", "timestamp", "date", "inet"}
)

// Columns names the columns of a table that the command line fixes; empty: found from the
// schema.
type Columns struct {
	ID, Data, Label, Name string
	// NoLabel: the data table's rows have no label (one class), even if it has a label column.
	NoLabel bool
}

// dataTable is a data table with its columns found.
type dataTable struct {
	Table
	split string
	id    string
	data  string
	label string   // "" none
	name  string   // "" none: the file name is made from the id
	meta  []string // other columns, whose values become metadata
}

// findDataColumns finds the columns of a data table, or says why the table cannot be
// attached and what would work.
func findDataColumns(t Table, want Columns) (dataTable, error) {
	d := dataTable{Table: t}
	pk := partitionKey(t)
	switch {
	case len(pk) == 0:
		return d, fmt.Errorf("data table %s: no partition key in its schema", t)
	case len(pk) > 1:
		return d, fmt.Errorf("data table %s: its partition key (%s) is composite; attach needs one row per image keyed by one uuid column (as data_by_uuid(patch_id uuid PRIMARY KEY, label int, data blob))", t, strings.Join(t.PartitionKey(), ", "))
	case !slices.Contains(uuidTypes, pk[0].Type):
		return d, fmt.Errorf("data table %s: its partition key %s is %s; attach needs a uuid partition key (as id uuid PRIMARY KEY)", t, pk[0].Name, pk[0].Type)
	case want.ID != "" && want.ID != pk[0].Name:
		return d, fmt.Errorf("data table %s: --id-column %s is not its partition key; the partition key is %s (%s)", t, want.ID, pk[0].Name, pk[0].Type)
	}
	if cl := ofKind(t, "clustering"); len(cl) > 0 {
		return d, fmt.Errorf("data table %s: it has clustering columns (%s), so an id may hold several rows; attach needs one row per id (PRIMARY KEY (id) alone)", t, strings.Join(cl, ", "))
	}
	d.id = pk[0].Name

	blobs := ofType(t, "blob")
	switch {
	case want.Data != "":
		c, ok := t.Column(want.Data)
		if !ok {
			return d, fmt.Errorf("data table %s: no column %s (--data-column); its blob columns: %s", t, want.Data, list(blobs))
		}
		if c.Type != "blob" {
			return d, fmt.Errorf("data table %s: --data-column %s is %s; the image must be a blob column (its blob columns: %s)", t, c.Name, c.Type, list(blobs))
		}
		d.data = c.Name
	case len(blobs) == 0:
		return d, fmt.Errorf("data table %s: no blob column to read images from (columns: %s); the encoded image must be a blob column", t, list(names(t)))
	case len(blobs) > 1:
		return d, fmt.Errorf("data table %s: several blob columns (%s); name the image's with --data-column", t, list(blobs))
	default:
		d.data = blobs[0]
	}

	if !want.NoLabel {
		label := want.Label
		if label == "" {
			label = "label"
		}
		c, ok := t.Column(label)
		switch {
		case !ok && want.Label != "":
			return d, fmt.Errorf("data table %s: no column %s (--label-column); its int columns: %s", t, want.Label, list(ofType(t, intTypes...)))
		case ok && !slices.Contains(intTypes, c.Type):
			return d, fmt.Errorf("data table %s: label column %s is %s; a label must be an int column (name another with --label-column, or use --no-label for one class)", t, c.Name, c.Type)
		case ok:
			d.label = c.Name
		}
	}
	if want.Name != "" {
		if c, ok := t.Column(want.Name); ok {
			if !slices.Contains(textTypes, c.Type) {
				return d, fmt.Errorf("data table %s: --name-column %s is %s; file names must be a text column", t, c.Name, c.Type)
			}
			d.name = c.Name
		}
	}
	ignored := ""
	if want.NoLabel {
		ignored = cmp.Or(want.Label, "label") // --no-label: not a label, and no metadata either
	}
	for _, c := range t.Columns {
		if c.Name != d.id && c.Name != d.data && c.Name != d.label && c.Name != d.name && c.Name != ignored && slices.Contains(metaTypes, c.Type) {
			d.meta = append(d.meta, c.Name)
		}
	}
	return d, nil
}

func ofKind(t Table, kind string) []string {
	var names []string
	for _, c := range t.Columns {
		if c.Kind == kind {
			names = append(names, c.Name)
		}
	}
	return names
}

func names(t Table) []string {
	var names []string
	for _, c := range t.Columns {
		names = append(names, c.Name)
	}
	return names
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// metaTable is a metadata table with its columns found.
type metaTable struct {
	Table
	split string
	id    string   // the join column: the data table's id
	label string   // "" none: nothing to check the data table's label against
	name  string   // "" none
	class string   // "" not named: found from the values (see classColumn)
	cols  []string // every other column of a type metadata takes
}

// MetaColumns names the columns of a metadata table that the command line fixes.
type MetaColumns struct {
	ID, Label, Name, Class string
}

// findMetaColumns finds the columns of a metadata table: the uuid column joined with the
// data table's id (dataID, the data table's id column name), the label to check, the
// class-name column if named, and the metadata.
func findMetaColumns(t Table, want MetaColumns, dataID string) (metaTable, error) {
	m := metaTable{Table: t}
	uuids := ofType(t, uuidTypes...)
	pk := partitionKey(t)
	switch {
	case want.ID != "":
		c, ok := t.Column(want.ID)
		if !ok || !slices.Contains(uuidTypes, c.Type) {
			return m, fmt.Errorf("metadata table %s: --metadata-id-column %s is not a uuid column of it (its uuid columns: %s)", t, want.ID, list(uuids))
		}
		m.id = c.Name
	case slices.Contains(uuids, dataID):
		m.id = dataID
	case len(pk) == 1 && slices.Contains(uuidTypes, pk[0].Type):
		m.id = pk[0].Name
	case len(uuids) == 1:
		m.id = uuids[0]
	case len(uuids) == 0:
		return m, fmt.Errorf("metadata table %s: no uuid column to join with the data table's %s", t, dataID)
	default:
		return m, fmt.Errorf("metadata table %s: several uuid columns (%s) and none is named %s; name the one holding the data table's ids with --metadata-id-column", t, list(uuids), dataID)
	}
	label := want.Label
	if label == "" {
		label = "label"
	}
	if c, ok := t.Column(label); ok && slices.Contains(intTypes, c.Type) {
		m.label = c.Name
	} else if ok && want.Label != "" {
		return m, fmt.Errorf("metadata table %s: label column %s is %s; a label must be an int column", t, c.Name, c.Type)
	}
	if want.Name != "" {
		if c, ok := t.Column(want.Name); ok {
			if !slices.Contains(textTypes, c.Type) {
				return m, fmt.Errorf("metadata table %s: --name-column %s is %s; file names must be a text column", t, c.Name, c.Type)
			}
			m.name = c.Name
		}
	}
	if want.Class != "" {
		c, ok := t.Column(want.Class)
		if !ok || !slices.Contains(textTypes, c.Type) {
			return m, fmt.Errorf("metadata table %s: --class-column %s is not a text column of it (its text columns: %s)", t, want.Class, list(ofType(t, textTypes...)))
		}
		m.class = c.Name
	}
	for _, c := range t.Columns {
		if c.Name == m.id || c.Name == m.label || c.Name == m.name || c.Name == m.class || !slices.Contains(metaTypes, c.Type) {
			continue
		}
		if err := store.ValidColumnName(c.Name); err != nil {
			return m, fmt.Errorf("metadata table %s: column %s cannot be a metadata column: %v", t, c.Name, err)
		}
		m.cols = append(m.cols, c.Name)
	}
	return m, nil
}

// classColumn picks, among the text columns of a metadata table, the one that names the
// classes: one value per label and one label per value (the DALI plugin's or_label).
// values[col][label] holds the values seen per label; conflicts marks the columns with two
// values for a label or two labels for a value. Several such columns: the one whose name
// says label or class, else none (and an error asking for --class-column).
func classColumn(t string, candidates []string, conflict map[string]bool) (string, error) {
	var ok []string
	for _, c := range candidates {
		if !conflict[c] {
			ok = append(ok, c)
		}
	}
	if len(ok) <= 1 {
		if len(ok) == 1 {
			return ok[0], nil
		}
		return "", nil
	}
	var named []string
	for _, c := range ok {
		if strings.Contains(c, "label") || strings.Contains(c, "class") {
			named = append(named, c)
		}
	}
	if len(named) == 1 {
		return named[0], nil
	}
	return "", fmt.Errorf("metadata table %s: several text columns have one value per label (%s); name the one with the class names with --class-column", t, list(ok))
}
