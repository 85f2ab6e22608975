package claim

import (
	"slices"
)

// Slot evaluation: whether a claim's slots are covered, by which
// verdicts, and the causes that settle them.

// cause is a committed reason a Required slot cannot be covered by a target.
type cause struct {
	state     Status // ValidationIncomplete, ValidationFailed or ValidationErrored
	seq       uint64
	check     string
	artifact  string
	digest    string
	testament string
}

// slotEval is a slot's evaluation from scratch.
type slotEval struct {
	witness    *witness
	causes     []cause
	candidates int // targets under evaluation (neither witness nor dead)
	testaments int // received responses considered
}

type witness struct {
	artifact, digest, testament string
	seq                         uint64 // when its last gating check passed
}

// evalSlot evaluates slot i over every received response: a witness is one
// target (artifact id + digest) on which every gating check of the slot
// passed; a cause is a received response missing the slot, or a gating check
// concluded Fail, Incomplete or Errored on a target.
func (c *claimRec) evalSlot(i int) slotEval { return c.evalSlotAt(i, 0) }

// evalSlotAt is evalSlot as of sequence asOf (0: everything folded): a check
// that concluded after asOf counts as still running. A terminal claim's view
// is evaluated as of its end, so a verdict kept for the audit afterwards (a
// check that was running when the claim ended) never shows as a witness or a
// cause.
func (c *claimRec) evalSlotAt(i int, asOf uint64) slotEval {
	sl := &c.terms.Slots[i]
	var ev slotEval
	var seenBuf [4][2]string // targets already considered; a claim has few responses
	seen := seenBuf[:0]
	for _, tid := range c.tOrder {
		t := c.testaments[tid]
		if t.role != TestamentResponse || t.recvd == 0 {
			continue
		}
		ev.testaments++
		b, ok := t.binding(sl.Name)
		if !ok {
			ev.causes = append(ev.causes, cause{state: ValidationIncomplete, seq: t.recvd, testament: t.id})
			continue
		}
		key := [2]string{b.Artifact, b.Digest}
		if slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		passed, dead := true, false
		var last uint64
		for _, ch := range sl.Checks {
			if ch.Mode != Required {
				continue
			}
			a := c.attempts[attemptKey{ch.ID, b.Artifact, b.Digest}]
			if a == nil || (asOf > 0 && a.concluded > asOf) {
				passed = false
				continue
			}
			switch a.state {
			case attemptPassed:
				if a.concluded > last {
					last = a.concluded
				}
			case attemptFailed, attemptIncomplete, attemptErrored:
				dead, passed = true, false
				st := map[string]Status{attemptFailed: ValidationFailed, attemptIncomplete: ValidationIncomplete, attemptErrored: ValidationErrored}[a.state]
				ev.causes = append(ev.causes, cause{state: st, seq: a.concluded, check: ch.ID, artifact: b.Artifact, digest: b.Digest, testament: t.id})
			default:
				passed = false
			}
		}
		switch {
		case dead:
		case passed:
			if last == 0 {
				last = t.recvd
			}
			if ev.witness == nil || last < ev.witness.seq {
				ev.witness = &witness{artifact: b.Artifact, digest: b.Digest, testament: t.id, seq: last}
			}
		default:
			ev.candidates++
		}
	}
	return ev
}

// firstCause is the earliest committed cause (lowest seq; ties by check
// declaration order, which evalSlot already follows).
func (ev *slotEval) firstCause() *cause {
	var best *cause
	for i := range ev.causes {
		if best == nil || ev.causes[i].seq < best.seq {
			best = &ev.causes[i]
		}
	}
	return best
}

// settleSlots re-evaluates the given Required slots (declaration order),
// marking newly covered ones. It returns the terminal failure when an
// uncovered Required slot has a committed cause: the first such slot by
// declaration index decides.
func (c *claimRec) settleSlots(slots []int) *Terminal {
	var fail *Terminal
	for _, i := range slots {
		sl := &c.terms.Slots[i]
		if sl.Mode != Required || c.covered[i] {
			continue
		}
		ev := c.evalSlot(i)
		if ev.witness != nil {
			c.covered[i] = true
			c.uncovered--
			continue
		}
		if fail != nil {
			continue
		}
		if k := ev.firstCause(); k != nil {
			fail = &Terminal{State: k.state, Slot: sl.Name, Check: k.check, Artifact: k.artifact, Digest: k.digest, Testament: k.testament}
			switch k.state {
			case ValidationIncomplete:
				if k.check == "" {
					fail.Reason = "required slot " + sl.Name + " is missing from response " + k.testament
				} else {
					fail.Reason = "check " + k.check + " found nothing to evaluate in " + k.artifact
				}
			case ValidationFailed:
				fail.Reason = "check " + k.check + " failed on " + k.artifact
			case ValidationErrored:
				fail.Reason = "check " + k.check + " errored on " + k.artifact + " after every attempt and fallback"
			}
		}
	}
	return fail
}

func allSlots(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
