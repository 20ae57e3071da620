package memstore_test

import (
	"testing"

	"github.com/cassfs/cassfs/store"
	"github.com/cassfs/cassfs/store/memstore"
	"github.com/cassfs/cassfs/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New("test", memstore.Options{}) })
}

func TestMemoryAttacherConformance(t *testing.T) {
	storetest.RunAttacher(t, func(t *testing.T) store.Attacher { return memstore.New("test", memstore.Options{}) })
}
