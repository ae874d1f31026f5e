package sqlstore

// WithoutPipeline makes s run every transaction statement by statement,
// without pipelines (a benchmark's second arm). Not safe while s is in
// use.
func WithoutPipeline(s *Store) {
	d := *s.d
	d.pipeline = false
	s.d = &d
}
