package natskv

// ConfigOf is the configuration s runs with, defaults filled in (feature:
// rate limits per tool, whose contract test opens a second store on it).
func ConfigOf(s *Store) Config { return s.cfg }
