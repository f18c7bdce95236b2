package memstore

// NonBlocking reports that the store's calls never wait on I/O or on
// another request for longer than a shard lock, so callers need not bound
// them with a deadline.
func (s *Store) NonBlocking() bool { return true }
