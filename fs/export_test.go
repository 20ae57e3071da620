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
