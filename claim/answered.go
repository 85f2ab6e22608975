package claim

import (
	"time"

	"tally/instant"
)

// Ended reports when claim id ended (the time of the record that made it
// terminal), and whether it has.
func (s *State) Ended(id string) (time.Time, bool) {
	c := s.claim(id)
	if c == nil || c.end == nil {
		return time.Time{}, false
	}
	t, err := instant.Parse("ts", c.end.TS)
	return t, err == nil
}

// AnsweredBy is the successor that answered claim id: the first Satisfied
// claim along its successors (a successor's successors in turn), or "".
// A failed claim keeps its failure; a Satisfied successor is its answer.
func (s *State) AnsweredBy(id string) string {
	seen := map[string]bool{id: true}
	queue := []string{id}
	for len(queue) > 0 {
		c := s.claim(queue[0])
		queue = queue[1:]
		if c == nil {
			continue
		}
		for _, succ := range c.successors {
			if seen[succ] {
				continue
			}
			seen[succ] = true
			if d := s.claim(succ); d != nil && d.end != nil && d.end.State == Satisfied {
				return succ
			}
			queue = append(queue, succ)
		}
	}
	return ""
}
