package cassandra

import (
	"crypto/sha256"
	"fmt"

	"github.com/cassfs/cassfs/store"
	"github.com/google/uuid"
)

// ValidDatasetName reports why name cannot be a dataset (keyspace) name, or nil: the
// portable rule of store.ValidDatasetName, and none of Cassandra's own keyspaces. Names
// are then unquoted CQL identifiers, so formatting one into a statement is safe.
func ValidDatasetName(name string) error {
	if err := store.ValidDatasetName(name); err != nil {
		return err
	}
	switch name {
	case "system", "system_auth", "system_schema", "system_distributed", "system_traces",
		"system_views", "system_virtual_schema", "system_cluster_metadata":
		return fmt.Errorf("invalid dataset name %q: reserved by Cassandra", name)
	}
	return nil
}

// splitDigest is the checksum stored with a split's members, to detect a torn or lost chunk.
func splitDigest(ids []uuid.UUID) []byte {
	h := sha256.New()
	for _, id := range ids {
		h.Write(id[:])
	}
	return h.Sum(nil)
}
