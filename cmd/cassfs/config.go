package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// applyConfig sets the flags of c from the YAML file given with --config: a mapping of
// flag names (without dashes) to values, lists for repeatable flags. Flags given on the
// command line win. A key that is no flag of c, or a password, is an error.
//
//	dataset: tiles
//	hosts: 10.0.0.5,10.0.0.6
//	cache-size: 8GiB
//	tls-ca: /etc/cassfs/ca.pem
//	address-map: ["10.0.0.5:9042=127.0.0.1:19042"]
func applyConfig(c *cobra.Command, path string) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return usageError{fmt.Errorf("--config: %w", err)}
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return usageError{fmt.Errorf("--config %s: not a YAML mapping of flag names to values: %w", path, err)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.Contains(k, "password") && k != "password-file" {
			return usageError{fmt.Errorf("--config %s: %q: a password does not belong in a configuration file; use password-file or $CASSFS_PASSWORD", path, k)}
		}
		fl := c.Flags().Lookup(k)
		if fl == nil || k == "config" || k == "help" {
			return usageError{fmt.Errorf("--config %s: %q is not a flag of cassfs %s (see --help)", path, k, c.Name())}
		}
		if fl.Changed {
			continue // the command line wins
		}
		values, err := configValues(m[k])
		if err != nil {
			return usageError{fmt.Errorf("--config %s: %s: %w", path, k, err)}
		}
		for _, v := range values {
			if err := c.Flags().Set(fl.Name, v); err != nil {
				return usageError{fmt.Errorf("--config %s: %s: %w", path, k, err)}
			}
		}
	}
	return nil
}

// configValues turns a YAML value into flag values: scalars as written, lists one by one.
func configValues(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, errors.New("no value")
	case []any:
		var out []string
		for _, e := range v {
			s, err := configValues(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case map[string]any:
		return nil, errors.New("a mapping is not a flag value")
	default:
		return []string{fmt.Sprint(v)}, nil
	}
}
