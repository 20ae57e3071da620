package fs

import "time"

// SetRecentPushWindow sets how long a push keeps a READ of its sample from counting as a
// reclaim (a generation of recentPushes, 1 s by default), so a test need not wait it out.
func SetRecentPushWindow(f *FS, d time.Duration) { f.recent.every.Store(int64(d)) }
