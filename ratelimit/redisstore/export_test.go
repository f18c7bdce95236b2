package redisstore

// InverseRefundsOnly makes s refund a Cluster count by its inverse
// operation even when the key is untouched since, so that tests exercise
// the inverse without concurrent traffic.
func InverseRefundsOnly(s *Store) { s.inverseOnly = true }
