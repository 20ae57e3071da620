package fs

import "github.com/cassfs/cassfs/view"

// followNextEpochs follows ahead of the readers the next epoch of each view whose readers
// reached its end, the mount being quiet ("The next epoch's names, bound between epochs").
func (la *lookahead) followNextEpochs() {
	type epochDir struct {
		e   *view.Epoch
		dir string
	}
	var ended []epochDir
	la.mu.Lock()
	la.follow.Ended(func(e *view.Epoch, dir string) { ended = append(ended, epochDir{e, dir}) })
	la.mu.Unlock()
	for _, v := range ended {
		// The next epoch's order is computed outside mu: readers' lookups are not held up.
		if e, dir, ok := la.f.views.NextEpoch(v.e, v.dir); ok {
			la.mu.Lock()
			la.follow.FollowAhead(e, dir)
			la.mu.Unlock()
		}
	}
}
