package claim

import (
	"slices"
	"strings"
	"time"

	"tally/instant"
	prio "tally/priority"
	"tally/refuse"
)

// Priorities, as beads users know them: 0 is the highest. A claim or a
// promise that records none has DefaultPriority.
const (
	DefaultPriority = prio.Default
	MaxPriority     = prio.Max
)

// MaxPoolSeats bounds the seats a claim's pool names.
const MaxPoolSeats = 256

// pooled reports whether the claim was posted to a pool: created without a
// respondent. Its respondent is the seat whose receipt came first.
func (c *claimRec) pooled() bool { return c.terms.Respondent == "" }

// respondent is the named respondent, or a pool claim's first receipt
// holder ("" while nobody has taken it).
func (c *claimRec) respondent() string {
	if c.terms.Respondent != "" {
		return c.terms.Respondent
	}
	return c.taker
}

// priority is the claim's recorded priority, else DefaultPriority.
func (c *claimRec) priority() int {
	if c.terms.Priority != nil {
		return *c.terms.Priority
	}
	return DefaultPriority
}

// mayTake reports whether seat may acquire the receipt of a pool claim: a
// seat the pool names, or any seat when it names none.
func (c *claimRec) mayTake(seat string) bool {
	return len(c.terms.Pool) == 0 || slices.Contains(c.terms.Pool, seat)
}

// validatePoolReceipt holds the rules of a pool claim's receipt: the first
// seat of the pool to acquire it becomes the respondent, and its generation
// fences every later acquirer, who is refused naming the holder. A pool
// claim is not declined: a seat that cannot take it leaves it to the others.
func (c *claimRec) validatePoolReceipt(m Meta, e *Event) *refuse.Refusal {
	if c.receipt.generation > 0 {
		return refuse.Conflictf("claim", "receipt already acquired by "+c.receipt.holder+" (generation "+u(c.receipt.generation)+")")
	}
	if !c.mayTake(m.Actor) {
		return refuse.Forbiddenf("actor", "only a seat of the pool ("+strings.Join(c.terms.Pool, ", ")+") acquires the receipt")
	}
	if c.stage == Generated {
		return refuse.Conflictf("claim", "not posted yet")
	}
	if e.Type == TypeReceiptFailed {
		return refuse.Conflictf("claim", "a claim posted to a pool is not declined: leave it to another seat")
	}
	if e.Holder != m.Actor || e.Generation != 1 {
		return refuse.Invalidf("holder", "the first receipt is held by the seat taking it, at generation 1")
	}
	return nil
}

// Takeable is one claim a seat can take now (State.Takeable).
type Takeable struct {
	Claim      string    `json:"claim"`
	Claimant   string    `json:"claimant"`
	Work       string    `json:"work"`
	Priority   int       `json:"priority"`
	Deadline   string    `json:"deadline,omitempty"`
	Pool       []string  `json:"pool,omitempty"` // the seats that may take it; empty: any seat, or the named respondent alone
	Pooled     bool      `json:"pooled"`         // posted to a pool (no respondent named)
	CreatedSeq uint64    `json:"created_seq"`
	Due        time.Time `json:"-"` // the deadline as a time (zero: none)
}

// Takeable lists the claims seat can take now, in creation order: posted,
// no receipt acquired yet, seat may acquire it (it is the named respondent,
// or a seat of the claim's pool), every DependsOn target Satisfied and every
// Awaits target terminal. A pure function of the fold: the same log gives
// the same list.
func (s *State) Takeable(seat string) []Takeable {
	out := []Takeable{}
	for _, c := range s.order {
		if c.end != nil || c.stage != Posted || c.receipt.generation > 0 {
			continue
		}
		if c.pooled() {
			if !c.mayTake(seat) {
				continue
			}
		} else if c.terms.Respondent != seat {
			continue
		}
		if !s.depsOK(c) {
			continue
		}
		t := Takeable{Claim: c.id, Claimant: c.terms.Claimant, Work: c.terms.Work, Priority: c.priority(),
			Pool: slices.Clone(c.terms.Pool), Pooled: c.pooled(), CreatedSeq: c.seq, Due: c.terms.Deadline}
		if !c.terms.Deadline.IsZero() {
			t.Deadline = instant.Format(c.terms.Deadline)
		}
		out = append(out, t)
	}
	return out
}
