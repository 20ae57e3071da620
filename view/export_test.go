package view

// targetsKey resolves the name of an epoch view's targets twin in split itself (the
// mount's own shard), as a split's directory does.
func (s *Set) targetsKey(split, name string) (Key, bool) {
	return s.TargetsKeyIn(split, s.cfg.Shard, name)
}
