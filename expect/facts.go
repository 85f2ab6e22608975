package expect

import "time"

// Fact reports whether a fact with key was recorded, and the "at" of the
// first one.
func (s *State) Fact(key string) (time.Time, bool) {
	n, ok := s.factFirst[key]
	if !ok {
		return time.Time{}, false
	}
	return fromNanos(n), true
}
