package liveness

import (
	"fmt"
	"time"
)

// Late homework: a suspected member asks its accuser for a bounded
// extension, carrying a progress witness (the tick count of its control
// loop). The grants halve from GrantBase down to GrantFloor and stop
// after GrantsMax per incarnation; a new incarnation starts again.
const (
	GrantBase  = 3120 * time.Millisecond
	GrantFloor = time.Second
	GrantsMax  = 5
	// MemoryShareMax is the share of its memory limit past which a member
	// reports itself overloaded; DiskFloor the free disk under which it
	// does. An overloaded member is healed, not extended.
	MemoryShareMax = 0.90
	DiskFloor      = 64 << 20
)

// GrantFor is the k-th grant's length (k from 0): GrantBase / 2^k, never
// under GrantFloor.
func GrantFor(k int) time.Duration {
	return max(GrantFloor, GrantBase>>min(k, 30))
}

// Load is what a member says of its own resources. A zero limit or a zero
// Disk total means unknown, which is not overloaded.
type Load struct {
	MemoryUsed  uint64 `json:"memory_used,omitempty"`
	MemoryLimit uint64 `json:"memory_limit,omitempty"`
	DiskFree    uint64 `json:"disk_free,omitempty"`
	DiskKnown   bool   `json:"disk_known,omitempty"`
}

// Overloaded says whether the load is past MemoryShareMax of its memory
// limit or under DiskFloor of free disk, and which.
func (l Load) Overloaded() (bool, string) {
	if l.MemoryLimit > 0 && float64(l.MemoryUsed) > MemoryShareMax*float64(l.MemoryLimit) {
		return true, fmt.Sprintf("memory %d of %d bytes, past %.0f%%", l.MemoryUsed, l.MemoryLimit, 100*MemoryShareMax)
	}
	if l.DiskKnown && l.DiskFree < DiskFloor {
		return true, fmt.Sprintf("disk free %d bytes, under %d", l.DiskFree, DiskFloor)
	}
	return false, ""
}

// Homework is a suspected member's request for an extension.
type Homework struct {
	Incarnation uint64
	// Witness is the tick count of the member's control loop.
	Witness uint64
	Load    Load
	At      time.Time
}

// Denial is why a request was not granted (a metric label: do not rename).
type Denial string

const (
	Granted          Denial = ""
	DenyStale        Denial = "stale_incarnation"
	DenyOverloaded   Denial = "overloaded"
	DenyExhausted    Denial = "exhausted"
	DenyUnchanged    Denial = "witness_unchanged"
	DenyTooSoon      Denial = "too_soon"
	DenyNotSuspected Denial = "not_suspected"
)

// Denials are every denial, in the order they are checked.
var Denials = []Denial{DenyNotSuspected, DenyStale, DenyOverloaded, DenyExhausted, DenyUnchanged, DenyTooSoon}

// Decision is a request's answer: a grant of Grant, or a denial.
type Decision struct {
	Denial Denial
	Grant  time.Duration
	// Detail says more of a denial (the overload).
	Detail string
}

// Grants is an accuser's record of the grants it gave one member.
//
// Invariant: Used ≤ GrantsMax; Witness and Last are those of the previous
// grant, or the baseline (the last witness seen before the suspicion) with
// a zero Last.
type Grants struct {
	Incarnation uint64
	Used        int
	Witness     uint64
	Last        time.Time
}

// Baseline records a witness seen while the member was not suspected: the
// first grant needs the witness advanced past it.
func (g Grants) Baseline(inc, witness uint64) Grants {
	if inc > g.Incarnation {
		return Grants{Incarnation: inc, Witness: witness}
	}
	if inc == g.Incarnation && g.Used == 0 {
		g.Witness = max(g.Witness, witness)
	}
	return g
}

// Decide answers a request made at incarnation r.Incarnation, at r.At,
// with probe period period: a grant when the witness advanced since the
// previous grant (or the baseline), at least one period after the previous
// grant, from a member not overloaded, with fewer than GrantsMax used at
// this incarnation. A higher incarnation starts the allowance again.
func (g Grants) Decide(r Homework, period time.Duration) (Grants, Decision) {
	if r.Incarnation < g.Incarnation {
		return g, Decision{Denial: DenyStale, Detail: fmt.Sprintf("incarnation %d is below %d", r.Incarnation, g.Incarnation)}
	}
	if r.Incarnation > g.Incarnation {
		g = Grants{Incarnation: r.Incarnation}
	}
	if over, why := r.Load.Overloaded(); over {
		return g, Decision{Denial: DenyOverloaded, Detail: why}
	}
	if g.Used >= GrantsMax {
		return g, Decision{Denial: DenyExhausted, Detail: fmt.Sprintf("%d grants used at incarnation %d", g.Used, g.Incarnation)}
	}
	if r.Witness <= g.Witness {
		return g, Decision{Denial: DenyUnchanged, Detail: fmt.Sprintf("witness %d, not past %d", r.Witness, g.Witness)}
	}
	if g.Used > 0 && r.At.Sub(g.Last) < period {
		return g, Decision{Denial: DenyTooSoon, Detail: fmt.Sprintf("%v after the previous grant, under %v", r.At.Sub(g.Last), period)}
	}
	d := GrantFor(g.Used)
	g.Used++
	g.Witness, g.Last = r.Witness, r.At
	return g, Decision{Grant: d}
}
