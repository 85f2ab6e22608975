package claim

import "strings"

// ScopeView says whether a claim has released its scope, and why or why not.
//
// A claim releases its scope when it is terminal, every wait (Awaits
// target) is settled — terminal in any state, a cancelled wait included —
// and every child (DependsOn target: the child work the claim declared) has
// released its own scope. Unrolled, that is: every claim of its DependsOn
// closure, itself included, is terminal with its waits settled; an unknown
// wait or child holds the release back. On a DependsOn cycle whose members
// are all settled this releases them all (the greatest fixpoint: release
// asks "is any work under me still unfinished?", and none is), unlike
// acceptance, where a cycle must never justify itself. Release is derived on
// read and never written: it follows from committed states only.
type ScopeView struct {
	Released bool     `json:"released"`
	Reason   string   `json:"reason"`
	Waits    []string `json:"waits,omitempty"`    // Awaits targets not yet terminal, in declaration order
	Children []string `json:"children,omitempty"` // DependsOn targets not yet released, in declaration order
}

// ScopeReleased reports the scope release of one claim.
func (s *State) ScopeReleased(id string) (ScopeView, bool) {
	c := s.claim(id)
	if c == nil {
		return ScopeView{}, false
	}
	return s.scope(c, map[*claimRec]bool{}), true
}

// settled reports whether c itself holds nothing back: it is terminal and
// every wait (Awaits target) is a known, terminal claim.
func (s *State) settled(c *claimRec) bool {
	if c.end == nil {
		return false
	}
	for _, id := range c.terms.Awaits {
		if w := s.claim(id); w == nil || w.end == nil {
			return false
		}
	}
	return true
}

// scopeReleased decides the release of c: every claim of its DependsOn
// closure, c included, is known and settled. It walks the closure breadth
// first; memo keeps the answers of claims whose closure was walked whole
// (both answers are exact, so later walks stop there). Cost: the DependsOn
// subgraph below c, never the ledger.
func (s *State) scopeReleased(c *claimRec, memo map[*claimRec]bool) bool {
	if r, ok := memo[c]; ok {
		return r
	}
	seen := map[*claimRec]bool{c: true}
	queue := []*claimRec{c}
	ok := true
	for len(queue) > 0 && ok {
		d := queue[0]
		queue = queue[1:]
		if r, known := memo[d]; known {
			ok = r
			continue
		}
		if !s.settled(d) {
			ok = false
			break
		}
		for _, id := range d.terms.DependsOn {
			ch := s.claim(id)
			if ch == nil {
				ok = false
				break
			}
			if !seen[ch] {
				seen[ch] = true
				queue = append(queue, ch)
			}
		}
	}
	memo[c] = ok
	return ok
}

func (s *State) scope(c *claimRec, memo map[*claimRec]bool) ScopeView {
	var v ScopeView
	for _, id := range c.terms.Awaits {
		if w := s.claim(id); w == nil || w.end == nil {
			v.Waits = append(v.Waits, id)
		}
	}
	for _, id := range c.terms.DependsOn {
		if ch := s.claim(id); ch == nil || !s.scopeReleased(ch, memo) {
			v.Children = append(v.Children, id)
		}
	}
	var why []string
	if c.end == nil {
		why = append(why, "the claim is open ("+string(c.stage)+"); only a terminal claim releases its scope")
	}
	if len(v.Waits) > 0 {
		why = append(why, "waiting on "+strings.Join(v.Waits, ", ")+" (not terminal)")
	}
	if len(v.Children) > 0 {
		why = append(why, "child "+strings.Join(v.Children, ", ")+" has not released its scope")
	}
	if len(why) > 0 {
		v.Reason = strings.Join(why, "; ")
		return v
	}
	v.Released = true
	switch {
	case len(c.terms.Awaits)+len(c.terms.DependsOn) == 0:
		v.Reason = "terminal (" + string(c.end.State) + ") with no waits and no children"
	default:
		v.Reason = "terminal (" + string(c.end.State) + "), every wait settled and every child released"
	}
	return v
}
