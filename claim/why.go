package claim

import (
	"strconv"
	"strings"
)

// Reason is one thing a claim is waiting on before it can be Satisfied, or,
// for a claim that ended unsatisfied, why it ended and what it lacked at the
// end. View.Why lists them; it is empty for a Satisfied claim. Text is one
// line for people, the same on the CLI, over HTTP and in A2A status
// messages; the other members say the same for programs.
type Reason struct {
	Kind    string        `json:"kind"`              // ended | delivery | slot | depends_on | awaits
	Name    string        `json:"name,omitempty"`    // slot: the slot; depends_on, awaits: the claim waited on; ended: the state
	Text    string        `json:"text"`              // e.g. "slot change: patch-a: behavior pass, review missing"
	Targets []TargetState `json:"targets,omitempty"` // slot: each candidate artifact, in response order
	Chain   []string      `json:"chain,omitempty"`   // depends_on, awaits: the claims waited on, in turn; ends with this claim on a cycle through it
}

// TargetState is one candidate artifact of a slot and where each of the
// slot's gating checks stands on it.
type TargetState struct {
	Artifact  string       `json:"artifact"`
	Digest    string       `json:"digest"`
	Testament string       `json:"testament"` // the received response binding it
	Checks    []CheckState `json:"checks"`    // passes first, then the rest, each in declaration order
}

// CheckState is one gating check on one target: pass, running, missing (not
// begun, or between attempts or phases), fail, incomplete or errored.
type CheckState struct {
	Check string `json:"check"`
	State string `json:"state"`
}

// The kinds of Reason. Stored in views: do not rename.
const (
	ReasonEnded     = "ended"
	ReasonDelivery  = "delivery"
	ReasonSlot      = "slot"
	ReasonDependsOn = "depends_on"
	ReasonAwaits    = "awaits"
)

// Bounds on the walks that explain dependencies: each follows at most
// maxWhyHops claims down one chain, and the search for cycles back to the
// claim visits at most maxWhyVisit claims for all its relations together, so
// an explanation never costs more than a bounded part of the graph.
// At most maxWhyRelations relations are explained one by one; the rest are
// counted in one last reason.
const (
	maxWhyHops      = 32
	maxWhyVisit     = 4096
	maxWhyRelations = 64
)

// WhyText is the reasons' texts, one per line: the A2A status message of a
// claim that is not Satisfied.
func WhyText(why []Reason) string {
	lines := make([]string, len(why))
	for i, r := range why {
		lines[i] = r.Text
	}
	return strings.Join(lines, "\n")
}

// why explains why c is not Satisfied: for an open claim, the delivery it
// waits on, each Required slot without a witness, and each blocking
// relation that does not hold yet; for a claim that ended unsatisfied, how
// it ended and what it lacked then (as of its end).
func (s *State) why(c *claimRec) []Reason {
	out := []Reason{}
	if c.end != nil {
		if c.end.State == Satisfied {
			return out
		}
		out = append(out, Reason{Kind: ReasonEnded, Name: string(c.end.State), Text: string(c.end.State) + ": " + c.end.Reason})
	}
	out = append(out, c.ownReasons()...)
	if c.end == nil {
		out = append(out, s.dependencyReasons(c)...)
	}
	return out
}

// ownReasons are what c lacks by itself: the delivery and its Required
// slots (as of its end when terminal), not its relations.
func (c *claimRec) ownReasons() []Reason {
	var out []Reason
	if c.delivery == 0 {
		out = append(out, Reason{Kind: ReasonDelivery, Text: c.deliveryText()})
	}
	asOf := c.asOf()
	for i := range c.terms.Slots {
		sl := &c.terms.Slots[i]
		if sl.Mode != Required {
			continue
		}
		if ev := c.evalSlotAt(i, asOf); ev.witness != nil {
			continue
		}
		r := Reason{Kind: ReasonSlot, Name: sl.Name, Targets: c.targetStates(i, asOf)}
		var parts []string
		for _, t := range r.Targets {
			var checks []string
			for _, ch := range t.Checks {
				checks = append(checks, ch.Check+" "+ch.State)
			}
			if len(checks) == 0 {
				checks = []string{"no check run"}
			}
			parts = append(parts, t.Artifact+": "+strings.Join(checks, ", "))
		}
		if len(parts) == 0 {
			parts = []string{"no received response delivers it yet"}
		}
		r.Text = "slot " + sl.Name + ": " + strings.Join(parts, "; ")
		out = append(out, r)
	}
	return out
}

// deliveryText says what the implicit delivery check waits on: the step of
// the exchange the claim has reached.
func (c *claimRec) deliveryText() string {
	switch c.stage {
	case Generated:
		return "the claim is not posted yet (claimant " + c.terms.Claimant + ")"
	case Posted:
		if c.pooled() {
			return "no seat of the pool has acquired the execution receipt"
		}
		return "the respondent " + c.terms.Respondent + " has not acquired the execution receipt"
	}
	var closed, posted string
	for _, id := range c.tOrder {
		t := c.testaments[id]
		if t.role != TestamentResponse {
			continue
		}
		if t.posted > 0 && posted == "" {
			posted = t.id
		}
		if t.posted == 0 && closed == "" {
			closed = t.id
		}
	}
	switch {
	case posted != "":
		return "testament " + posted + " is posted; the claimant " + c.terms.Claimant + " has not received it"
	case closed != "":
		return "testament " + closed + " is closed but not posted"
	}
	return "no closing testament from " + c.receipt.holder + " yet (work cycle " + u(c.cycles+1) + " of " + strconv.Itoa(c.terms.MaxResponses) + ")"
}

// targetStates lists the candidates of slot i as of asOf: each target bound
// to the slot in a received response, once, with its gating checks.
func (c *claimRec) targetStates(i int, asOf uint64) []TargetState {
	sl := &c.terms.Slots[i]
	var out []TargetState
	for _, tid := range c.tOrder {
		t := c.testaments[tid]
		if t.role != TestamentResponse || t.recvd == 0 {
			continue
		}
		b, ok := t.binding(sl.Name)
		if !ok || containsTarget(out, b) {
			continue
		}
		ts := TargetState{Artifact: b.Artifact, Digest: b.Digest, Testament: t.id, Checks: []CheckState{}}
		var rest []CheckState
		for _, ch := range sl.Checks {
			if ch.Mode != Required {
				continue
			}
			st := c.checkStateAt(ch.ID, b, asOf)
			if st == "pass" {
				ts.Checks = append(ts.Checks, CheckState{Check: ch.ID, State: st})
			} else {
				rest = append(rest, CheckState{Check: ch.ID, State: st})
			}
		}
		ts.Checks = append(ts.Checks, rest...)
		out = append(out, ts)
	}
	return out
}

func containsTarget(list []TargetState, b Binding) bool {
	for _, t := range list {
		if t.Artifact == b.Artifact && t.Digest == b.Digest {
			return true
		}
	}
	return false
}

// checkStateAt is where a check stands on a target as of asOf (0: now): a
// check that concluded after asOf was still running then.
func (c *claimRec) checkStateAt(check string, b Binding, asOf uint64) string {
	a := c.attempts[attemptKey{check, b.Artifact, b.Digest}]
	switch {
	case a == nil:
		return "missing"
	case asOf > 0 && a.concluded > asOf:
		return "running"
	}
	switch a.state {
	case attemptPassed:
		return "pass"
	case attemptFailed:
		return "fail"
	case attemptIncomplete, attemptErrored, attemptRunning:
		return a.state
	}
	return "missing"
}

// blockers lists c's blocking relations that do not hold, in declaration
// order (depends_on, then awaits): the relation and the target.
func (s *State) blockers(c *claimRec) [][2]string {
	var out [][2]string
	for _, id := range c.terms.DependsOn {
		if d := s.claim(id); d == nil || d.end == nil || d.end.State != Satisfied {
			out = append(out, [2]string{ReasonDependsOn, id})
		}
	}
	for _, id := range c.terms.Awaits {
		if d := s.claim(id); d == nil || d.end == nil {
			out = append(out, [2]string{ReasonAwaits, id})
		}
	}
	return out
}

// dependencyReasons explains each blocking relation of the open claim c
// that does not hold: what its target waits on, or the cycle that leads
// back to c.
func (s *State) dependencyReasons(c *claimRec) []Reason {
	var out []Reason
	budget := maxWhyVisit
	blockers := s.blockers(c)
	for i, b := range blockers {
		rel, target := b[0], b[1]
		if i == maxWhyRelations {
			out = append(out, Reason{Kind: rel, Name: target, Text: "and " + strconv.Itoa(len(blockers)-i) + " more relation(s) that do not hold yet"})
			break
		}
		r := Reason{Kind: rel, Name: target}
		if cycle := s.pathBack(target, c.id, &budget); cycle != nil {
			r.Chain = cycle
			r.Text = waitsText(cycle[:len(cycle)-1]) + ", which waits on this claim"
		} else {
			r.Chain, r.Text = s.waitChain(target)
		}
		out = append(out, r)
	}
	return out
}

// waitsText is "waits on A, which waits on B, …" for a chain of claims.
func waitsText(chain []string) string {
	return "waits on " + strings.Join(chain, ", which waits on ")
}

// pathBack returns the shortest chain from the open claim from to home over
// blocking relations that do not hold (from first, home last), or nil when
// there is none (or the search used up budget, the claims it may visit): the
// cycle through home that keeps it from being Satisfied.
func (s *State) pathBack(from, home string, budget *int) []string {
	if c := s.claim(from); c == nil || c.end != nil {
		return nil
	}
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 && *budget > 0 {
		*budget--
		x := queue[0]
		queue = queue[1:]
		for _, b := range s.blockers(s.claim(x)) {
			y := b[1]
			if y == home {
				chain := []string{home}
				for p := x; p != ""; p = parent[p] {
					chain = append(chain, p)
				}
				for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
					chain[i], chain[j] = chain[j], chain[i]
				}
				return chain
			}
			if _, seen := parent[y]; seen {
				continue
			}
			if d := s.claim(y); d == nil || d.end != nil {
				continue
			}
			parent[y] = x
			queue = append(queue, y)
		}
	}
	return nil
}

// waitChain follows target's first unmet need down the graph until a claim
// that lacks something itself (its delivery or a slot), one the ledger does
// not hold, one that ended unsatisfied, or a cycle not through the claim
// asking. It returns the chain walked and the text.
func (s *State) waitChain(target string) ([]string, string) {
	chain := []string{target}
	for x := target; len(chain) <= maxWhyHops; {
		d := s.claim(x)
		switch {
		case d == nil:
			return chain, waitsText(chain) + ", which the ledger does not hold"
		case d.end != nil && d.end.State != Satisfied:
			return chain, waitsText(chain) + ", which ended " + string(d.end.State) + ": " + d.end.Reason
		case d.end != nil:
			return chain, waitsText(chain) + " (" + string(d.end.State) + ")"
		}
		if own := d.ownReasons(); len(own) > 0 {
			return chain, waitsText(chain) + " (" + string(d.status()) + "): " + own[0].Text
		}
		next := s.blockers(d)
		if len(next) == 0 {
			return chain, waitsText(chain) + " (" + string(d.status()) + ")"
		}
		x = next[0][1]
		for _, id := range chain {
			if id == x {
				return append(chain, x), waitsText(append(chain, x)) + " (a cycle)"
			}
		}
		chain = append(chain, x)
	}
	return chain, waitsText(chain) + ", …"
}
