package fs

// ReclaimAfter is how many READs of resident files at once make every mark be forgotten.
const ReclaimAfter = reclaimAfter
