package main

import (
	"github.com/cassfs/cassfs/attach"
	"github.com/cassfs/cassfs/store/cassandra"
)

// The Cassandra store reads the tables dataset attach attaches.
var _ attach.Tables = (*cassandra.Store)(nil)
