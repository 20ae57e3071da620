package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gocql/gocql"
)

// datasetTables are the tables every dataset has (see the package doc): a keyspace holding
// them is a dataset.
var datasetTables = []string{"blobs", "labels", "samples"}

// Datasets lists the datasets of the cluster cfg reaches (cfg.Dataset is not used): the
// keyspaces holding cassfs's tables, by name.
func Datasets(ctx context.Context, cfg Config) ([]string, error) {
	cfg.defaults()
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("no Cassandra hosts given")
	}
	s, _, _, err := newSession(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	iter := s.Query(`SELECT keyspace_name, table_name FROM system_schema.tables`).WithContext(ctx).Idempotent(true).Iter()
	tables := map[string][]string{}
	var ks, table string
	for iter.Scan(&ks, &table) {
		if slices.Contains(datasetTables, table) {
			tables[ks] = append(tables[ks], table)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list the datasets: %w", kinded(err))
	}
	var out []string
	for ks, ts := range tables {
		if ValidDatasetName(ks) != nil {
			continue
		}
		switch {
		case len(ts) == len(datasetTables):
			out = append(out, ks)
		case len(ts) == len(datasetTables)-1 && !slices.Contains(ts, "blobs"):
			// Made by attach: a dataset once its sources are recorded (attached.go).
			var v string
			err := s.Query(`SELECT value FROM ` + ks + `.info WHERE key = 'sources'`).WithContext(ctx).Idempotent(true).Scan(&v)
			switch {
			case err == nil:
				out = append(out, ks)
			case !errors.Is(err, gocql.ErrNotFound):
				var re gocql.RequestError
				if errors.As(err, &re) && (re.Code() == gocql.ErrCodeInvalid || re.Code() == gocql.ErrCodeUnauthorized) {
					continue // no info table: not ours; or not the login's to read
				}
				return nil, fmt.Errorf("list the datasets: dataset %q: %w", ks, kinded(err))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Drop deletes the dataset: its keyspace, with every blob, sample, label and split. Mounts
// of it that still run fail their reads from then on (the tables are gone).
func (c *Store) Drop(ctx context.Context) error {
	if err := c.ddl(ctx, `DROP KEYSPACE IF EXISTS `+c.cfg.Dataset); err != nil {
		return fmt.Errorf("delete dataset %q: %w", c.cfg.Dataset, kinded(err))
	}
	return nil
}

// Delete deletes the dataset (Drop) and says what that removed beyond the keyspace: for a
// dataset made by attach, that the attached tables are untouched.
func (c *Store) Delete(ctx context.Context) (string, error) {
	var names []string
	if c.Attached() {
		sources, err := c.Sources(ctx)
		if err != nil {
			return "", err
		}
		for _, s := range sources {
			names = append(names, s.String())
		}
	}
	if err := c.Drop(ctx); err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", nil
	}
	return ": cassfs's catalogue only; the attached tables " + strings.Join(names, ", ") + " are untouched", nil
}
