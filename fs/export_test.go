package fs

// ReclaimAfter is how many READs of resident files at once make every mark be forgotten.
const ReclaimAfter = reclaimAfter

// ProcsFor is GOMAXPROCS for a base and n servers serving (procs.go).
var ProcsFor = procsFor

// ServersServing is how many servers this process serves (procs.go).
func ServersServing() int {
	procs.Lock()
	defer procs.Unlock()
	return procs.servers
}

// Unknow makes the filesystem take sample i's inode for one the kernel does not know, as a
// push refused for a race with its first lookup does (FS.Push).
func (f *FS) Unknow(i uint32) { f.known.Put(i, false) }

// NearQuiet and NearSparse: every resident file nearing the readers is looked at until
// NearQuiet in a row were found whole, then one in NearSparse (residency.go).
const NearQuiet, NearSparse = nearQuiet, nearSparse

// ListedNodesMax is the most entries of a class directory a listing gives nodes to.
const ListedNodesMax = listedNodesMax
