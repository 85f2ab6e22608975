package liveness

import (
	"cmp"
	"slices"
	"time"
)

// State is a member's liveness as an observer holds it (a wire word: do
// not rename).
type State string

const (
	Alive   State = "alive"
	Suspect State = "suspect"
	Dead    State = "dead"
)

// Detector is the deciding observer's table (the meta group's leader's):
// per member its incarnation, its state, the suspicion of it, the grants
// given to it. It takes what was observed, with the instant, and says what
// follows; it never reads a clock.
type Detector struct {
	self   uint64
	period time.Duration
	health Health
	peers  map[uint64]*peer
}

type peer struct {
	inc      uint64
	state    State
	answered bool
	susp     *Suspicion
	grants   Grants
	grace    time.Time // no suspicion starts before it
	refutes  int
	last     Decision
	lastAt   time.Time
	verdicts int
}

// NewDetector is self's table, probing every period.
func NewDetector(self uint64, period time.Duration) *Detector {
	return &Detector{self: self, period: period, peers: map[uint64]*peer{}}
}

// SetHealth sets the observer's health, which scales the suspicions it
// starts from now on.
func (d *Detector) SetHealth(h Health) { d.health = h }

// Members sets who is a member: new ones are alive at incarnation 0 and
// not yet answered; ones no longer members are forgotten.
func (d *Detector) Members(nodes []uint64) {
	for n := range d.peers {
		if !slices.Contains(nodes, n) {
			delete(d.peers, n)
		}
	}
	for _, n := range nodes {
		if n != d.self && d.peers[n] == nil {
			d.peers[n] = &peer{state: Alive}
		}
	}
}

// Heard is what a report from a member did.
type Heard struct {
	// Stale: the report's incarnation is below the one known; ignored.
	Stale bool
	// Refuted: the member was suspected or dead and now speaks at a higher
	// incarnation, which clears it.
	Refuted bool
	// Homework is set when the member was suspected at the report's
	// incarnation: the report asks for a grant, and this is the answer.
	Homework *Decision
	// State is the member's state after the report.
	State State
}

// Hear takes a report from member node at incarnation inc, carrying its
// witness and load, at now. A report is the member answering: at a higher
// incarnation it refutes; at the same one, while suspected, it asks for
// late homework.
func (d *Detector) Hear(node, inc, witness uint64, load Load, now time.Time) Heard {
	p := d.peers[node]
	if p == nil {
		return Heard{Stale: true}
	}
	p.answered = true
	switch {
	case inc < p.inc:
		return Heard{Stale: true, State: p.state}
	case inc > p.inc:
		refuted := p.state != Alive
		if refuted {
			p.refutes++
		}
		p.inc, p.state, p.susp = inc, Alive, nil
		p.grants = p.grants.Baseline(inc, witness)
		return Heard{Refuted: refuted, State: Alive}
	case p.state == Alive:
		p.grants = p.grants.Baseline(inc, witness)
		return Heard{State: Alive}
	case p.state == Dead:
		dec := Decision{Denial: DenyNotSuspected, Detail: "settled dead at this incarnation: refute with a higher one"}
		return Heard{Homework: &dec, State: Dead}
	}
	var dec Decision
	p.grants, dec = p.grants.Decide(Homework{Incarnation: inc, Witness: witness, Load: load, At: now}, d.period)
	p.last, p.lastAt = dec, now
	if dec.Denial == Granted {
		p.susp.Extend(dec.Grant)
		p.grace = now.Add(dec.Grant)
	}
	return Heard{Homework: &dec, State: Suspect}
}

// Answered records that node spoke to the cluster (an accuser vouches
// for it: its own alive message reached the accuser's memberlist), though
// this table never heard its report: it may be suspected. A member stopped before its first report reached the
// decider (a decider new since, or a start on a busy machine) is then
// still settled dead.
func (d *Detector) Answered(node uint64) {
	if p := d.peers[node]; p != nil {
		p.answered = true
	}
}

// Accused is what an accusation did.
type Accused string

const (
	AccuseStarted   Accused = "started"
	AccuseConfirmed Accused = "confirmed"
	// AccuseIgnored: a repeat, or nothing to confirm.
	AccuseIgnored    Accused = "ignored"
	AccuseNeverHeard Accused = "never_answered"
	AccuseStale      Accused = "stale"
	AccuseGrace      Accused = "grace"
	AccuseUnknown    Accused = "unknown"
)

// Accuse takes member from's accusation that node failed its probes at
// incarnation inc, at now: it starts a suspicion, counts as an independent
// confirmation of one, or changes nothing. Only a member that answered
// before is suspected; none during a grant's grace window; repeated
// evidence never restarts a suspicion.
func (d *Detector) Accuse(node, inc, from uint64, n int, now time.Time) Accused {
	p := d.peers[node]
	switch {
	case p == nil:
		return AccuseUnknown
	case !p.answered:
		return AccuseNeverHeard
	case inc < p.inc:
		return AccuseStale
	}
	if inc > p.inc {
		if p.state == Dead {
			// A member settled dead that gossip knows at a higher
			// incarnation restarted: it is settled alive on its own word
			// (Hear), never suspected at an incarnation it has not
			// spoken at here, which would make its first report a
			// homework request instead of a refutation.
			return AccuseIgnored
		}
		// An incarnation gossip knew before this table did: a fresh one.
		p.inc, p.state, p.susp = inc, Alive, nil
		p.grants = Grants{Incarnation: inc}
	}
	switch p.state {
	case Dead:
		return AccuseIgnored
	case Suspect:
		if p.susp.Confirm(from) {
			return AccuseConfirmed
		}
		return AccuseIgnored
	}
	if now.Before(p.grace) {
		return AccuseGrace
	}
	p.state = Suspect
	p.susp = NewSuspicion(node, inc, from, now, n, d.period, d.health)
	return AccuseStarted
}

// Stalled records that the observer itself did not run for gap (a late
// tick): every standing suspicion's deadline moves by gap, since no
// evidence could be heard meanwhile, so an observer that was stopped does
// not settle its peers dead the moment it runs again.
func (d *Detector) Stalled(gap time.Duration) {
	for _, p := range d.peers {
		if p.susp != nil && gap > 0 {
			p.susp.Extend(gap)
		}
	}
}

// Verdict is a settled death: the member's suspicion at Incarnation ran to
// its deadline with no refutation and no grant left to extend it.
type Verdict struct {
	Node, Incarnation uint64
}

// Expire settles, at now, every suspicion past its deadline as dead.
func (d *Detector) Expire(now time.Time) []Verdict {
	var out []Verdict
	for n, p := range d.peers {
		if p.state == Suspect && !now.Before(p.susp.Deadline()) {
			p.state, p.susp = Dead, nil
			p.verdicts++
			out = append(out, Verdict{Node: n, Incarnation: p.inc})
		}
	}
	slices.SortFunc(out, func(a, b Verdict) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// Settle records a fact committed elsewhere (the meta group's, by a
// previous decider or an operator's mark-dead) at incarnation inc, unless
// the table knows a higher one. A member settled at all answered before,
// so a new decider may suspect it at once.
func (d *Detector) Settle(node, inc uint64, state State) {
	p := d.peers[node]
	if p == nil {
		return
	}
	p.answered = true
	if inc < p.inc || (inc == p.inc && p.state == state) {
		return
	}
	if inc > p.inc || state == Dead {
		p.inc, p.state, p.susp = inc, state, nil
	}
}

// Peer is one member as the table holds it.
type Peer struct {
	Node        uint64
	Incarnation uint64
	State       State
	Answered    bool
	// GrantsUsed at this incarnation; Deadline of the suspicion, if any;
	// Confirmations counted in it.
	GrantsUsed    int
	Deadline      time.Time
	Confirmations int
	// LastDecision is the last homework answer (zero if none).
	LastDecision Decision
}

// Peer is node's row.
func (d *Detector) Peer(node uint64) (Peer, bool) {
	p := d.peers[node]
	if p == nil {
		return Peer{}, false
	}
	v := Peer{Node: node, Incarnation: p.inc, State: p.state, Answered: p.answered, GrantsUsed: p.grants.Used, LastDecision: p.last}
	if p.grants.Incarnation != p.inc {
		v.GrantsUsed = 0
	}
	if p.susp != nil {
		v.Deadline, v.Confirmations = p.susp.Deadline(), p.susp.Confirmed()
	}
	return v, true
}

// Peers are every member's rows, by node.
func (d *Detector) Peers() []Peer {
	out := make([]Peer, 0, len(d.peers))
	for n := range d.peers {
		v, _ := d.Peer(n)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
