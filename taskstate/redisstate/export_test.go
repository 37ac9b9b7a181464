package redisstate

// ReconcileNext makes s's next active Scan reconcile the active index, as
// if Config.ReconcileEvery had passed.
func ReconcileNext(s *Store) { s.recon.retry() }

// OwnerHash is the hash an owner's keys are named by.
func OwnerHash(owner string) string { return ownerHash(owner) }

// Sweeping reports whether s's active Scans still sweep the keys.
func Sweeping(s *Store) bool {
	_, ok := s.recon.step()
	return ok
}

// Prefix is the key prefix s writes under (feature: rate limits per tool,
// whose contract test opens a second store on it).
func Prefix(s *Store) string { return s.cfg.Prefix }
