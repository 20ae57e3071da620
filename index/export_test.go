package index

// MetaBytes is what the metadata columns take in memory.
func (ix *Index) MetaBytes() int64 { return ix.metaBytes() }
