package claim

import (
	"time"

	"tally/duequeue"
)

// Config holds the identities the fold trusts by role.
type Config struct {
	// Timekeeper is the only identity that may commit deadline and deadlock
	// facts (the timekeeper).
	Timekeeper string
}

// Terminal says how and why a claim ended.
type Terminal struct {
	State     Status   `json:"state"`
	Seq       uint64   `json:"seq"` // the record that ended the claim
	TS        string   `json:"ts"`
	Actor     string   `json:"actor,omitempty"`
	Reason    string   `json:"reason"`
	Slot      string   `json:"slot,omitempty"`      // the uncovered Required slot that decided
	Check     string   `json:"check,omitempty"`     // the check whose result decided
	Artifact  string   `json:"artifact,omitempty"`  // the target of that check
	Digest    string   `json:"digest,omitempty"`    //
	Testament string   `json:"testament,omitempty"` // the response missing the slot
	On        string   `json:"on,omitempty"`        // DependencyFailed: the failed DependsOn target
	Origin    string   `json:"origin,omitempty"`    // DependencyFailed: where the failure started
	Successor string   `json:"successor,omitempty"` // Superseded
	Members   []string `json:"members,omitempty"`   // Deadlocked: the wait-cycle
}

// Ignored is a record the fold did not apply: semantically invalid against
// the state it met (a verdict from the wrong evaluator, a stale generation).
// The record stays in the log; the fold reports it here.
type Ignored struct {
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Claim  string `json:"claim"`
	Actor  string `json:"actor"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// MaxIgnoredKept bounds the ignored-record list a State keeps; the count
// keeps growing past it.
const MaxIgnoredKept = 10000

// State is the folded claim family of one session.
//
// Invariant: claims only grow; a claim's terms never change after create; a
// claim's end, once set, never changes.
type State struct {
	cfg        Config
	claims     map[string]*claimRec
	order      []*claimRec         // creation order
	dependents map[string][]string // target id → claims naming it in depends_on or awaits, creation order
	seq        uint64              // last applied sequence
	ignored    []Ignored
	ignoredN   int
	deadlines  *duequeue.Index[*claimRec] // open claims with a deadline (made on first use)

	// Lookups go through claim(), which answers the Decide preview first,
	// then the claim last looked up by Decide or Apply, then the map. A
	// command and its records touch one claim a dozen times; in a ledger of
	// a million claims each map lookup is a cache miss (issue 3's figure).
	// Only Decide and Apply (writing) fill hot, so reads never write.
	hot, preview *claimRec
	writing      bool
}

// claim returns the claim id, or nil. See State.hot.
func (s *State) claim(id string) *claimRec {
	if p := s.preview; p != nil && p.id == id {
		return p
	}
	if h := s.hot; h != nil && h.id == id {
		return h
	}
	c := s.claims[id]
	if c != nil && s.writing {
		s.hot = c
	}
	return c
}

// NewStateConfig returns an empty state.
func NewStateConfig(cfg Config) *State {
	return &State{cfg: cfg, claims: map[string]*claimRec{}, dependents: map[string][]string{}}
}

// Len is the number of claims.
func (s *State) Len() int { return len(s.order) }

// Seq is the sequence of the last record applied.
func (s *State) Seq() uint64 { return s.seq }

// Ignored returns the records the fold did not apply (the first
// MaxIgnoredKept of them) and how many there were in all.
func (s *State) Ignored() ([]Ignored, int) { return s.ignored, s.ignoredN }

type receiptRec struct {
	holder     string
	generation uint64
	seq        uint64
}

type artifactRec struct {
	id, role, slot, kind, schema, name string
	cycle, generation                  uint64
	content, digest                    string
	size                               int64
	producer                           string
	seq                                uint64
	ts                                 time.Time
	received                           uint64 // seq of the claimant's artifact receipt
}

type testamentRec struct {
	id, role, author   string
	generation, cycle  uint64
	outcome, summary   string
	confidence         *float64
	bindings           []Binding
	diagnostics        []Ref
	results            []Ref
	seq, posted, recvd uint64
	ts                 time.Time
}

func (t *testamentRec) binding(slot string) (Binding, bool) {
	for _, b := range t.bindings {
		if b.Slot == slot {
			return b, true
		}
	}
	return Binding{}, false
}

type attemptKey struct{ check, artifact, digest string }

// Attempt states. Stored in views: do not rename.
const (
	attemptPending    = "pending"
	attemptRunning    = "running"
	attemptPassed     = "passed"
	attemptFailed     = "failed"
	attemptIncomplete = "incomplete"
	attemptErrored    = "errored"
)

type resultRec struct {
	Seq            uint64    `json:"seq"`
	TS             time.Time `json:"ts"`
	Check          string    `json:"check"`
	Phase          Phase     `json:"phase"`
	Handler        int       `json:"handler"`
	Validator      Validator `json:"validator"`
	Attempt        int       `json:"attempt"`
	Result         Result    `json:"result"`
	Evidence       string    `json:"evidence"`
	EvidenceDigest string    `json:"evidence_digest"`
	Note           string    `json:"note,omitempty"`
	Late           bool      `json:"late,omitempty"` // recorded after the claim ended: audit only
}

// attemptRec is one check's evaluation of one pinned target.
//
// Invariant: phase < len(phases); handler ≤ len(fallbacks); used < attempts
// while not concluded; state moves only pending ⇄ running → concluded.
type attemptRec struct {
	phase, handler, used int
	state                string
	runningAttempt       int
	concluded            uint64 // seq of the concluding verdict
	results              []resultRec
}

func (a *attemptRec) concludedState() bool {
	switch a.state {
	case attemptPassed, attemptFailed, attemptIncomplete, attemptErrored:
		return true
	}
	return false
}

type lateRec struct {
	Seq   uint64    `json:"seq"`
	TS    time.Time `json:"ts"`
	Type  string    `json:"type"`
	Actor string    `json:"actor"`
}

type progressRec struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Generation uint64    `json:"generation"`
	Note       string    `json:"note"`
}

type adoptionRec struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Holder     string    `json:"holder"`
	Generation uint64    `json:"generation"`
	Reason     string    `json:"reason,omitempty"`
}

// claimRec is the folded record of one claim.
type claimRec struct {
	id      string
	terms   *Event // the claim.create record: immutable terms
	seq     uint64
	created time.Time
	stage   Status
	end     *Terminal

	slotIdx  map[string]int    // slot name → index; nil for small claims (see indexedTerms)
	checkIdx map[string][2]int // check id → (slot index, check index); nil likewise

	receipt    receiptRec
	adoptions  []adoptionRec
	artifacts  map[string]*artifactRec
	artOrder   []string
	testaments map[string]*testamentRec
	tOrder     []string
	cycles     uint64 // response testaments closed
	attempts   map[attemptKey]*attemptRec
	attOrder   []attemptKey

	delivery          uint64 // seq of the first testament receipt (the implicit delivery check)
	deliveryTestament string
	covered           []bool // per slot: a witness exists (monotone)
	uncovered         int    // Required slots not covered
	localOK           bool   // every Required slot covered and delivery passed (monotone)

	progress   []progressRec
	late       []lateRec
	successors []string
	taker      string // a pool claim's respondent: the seat whose receipt was first

	dlSlot int32 // position in State.deadlines (+1; 0 when absent), written by the index alone
}

func newClaimRec(m Meta, e *Event) *claimRec {
	// Maps are made on first use: a ledger of a million claims mostly holds
	// claims that have no artifacts yet, and the GC scans what we allocate.
	c := &claimRec{id: e.Claim, terms: e, seq: m.Seq, created: m.TS, stage: Generated}
	checks := 0
	for _, sl := range e.Slots {
		checks += len(sl.Checks)
	}
	if len(e.Slots) > 0 {
		c.covered = make([]bool, len(e.Slots))
	}
	if checks > indexedTerms {
		c.slotIdx, c.checkIdx = map[string]int{}, map[string][2]int{}
	}
	for i, sl := range e.Slots {
		if c.slotIdx != nil {
			c.slotIdx[sl.Name] = i
			for j, ch := range sl.Checks {
				c.checkIdx[ch.ID] = [2]int{i, j}
			}
		}
		if sl.Mode == Required {
			c.uncovered++
		}
	}
	return c
}

// indexedTerms is the number of declared checks above which a claim indexes
// its slots and checks in maps. Below it a linear scan of the terms is as
// fast, and two maps per claim were most of the heap of a ledger of small
// claims (≈ 1.9 KB a claim at 1,000,000 one-slot claims).
const indexedTerms = 16

// slotIndex returns the declaration index of the slot named name, or -1.
func (c *claimRec) slotIndex(name string) int {
	if c.slotIdx != nil {
		if i, ok := c.slotIdx[name]; ok {
			return i
		}
		return -1
	}
	for i := range c.terms.Slots {
		if c.terms.Slots[i].Name == name {
			return i
		}
	}
	return -1
}

// clone copies everything apply may change, so Decide can preview a record.
func (c *claimRec) clone() *claimRec {
	d := *c
	if c.end != nil {
		t := *c.end
		d.end = &t
	}
	d.artifacts = make(map[string]*artifactRec, len(c.artifacts))
	for k, v := range c.artifacts {
		a := *v
		d.artifacts[k] = &a
	}
	d.testaments = make(map[string]*testamentRec, len(c.testaments))
	for k, v := range c.testaments {
		t := *v
		d.testaments[k] = &t
	}
	d.attempts = make(map[attemptKey]*attemptRec, len(c.attempts))
	for k, v := range c.attempts {
		a := *v
		a.results = append([]resultRec(nil), v.results...)
		d.attempts[k] = &a
	}
	d.covered = append([]bool(nil), c.covered...)
	d.artOrder = append([]string(nil), c.artOrder...)
	d.tOrder = append([]string(nil), c.tOrder...)
	d.attOrder = append([]attemptKey(nil), c.attOrder...)
	return &d
}

func (c *claimRec) check(id string) (*SlotSpec, *CheckSpec, bool) {
	var ij [2]int
	if c.checkIdx != nil {
		var ok bool
		if ij, ok = c.checkIdx[id]; !ok {
			return nil, nil, false
		}
	} else {
		found := false
		for i := range c.terms.Slots {
			for j := range c.terms.Slots[i].Checks {
				if c.terms.Slots[i].Checks[j].ID == id {
					ij, found = [2]int{i, j}, true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	sl := &c.terms.Slots[ij[0]]
	return sl, &sl.Checks[ij[1]], true
}

// gates reports whether a check gates acceptance: Required in a Required slot.
func gates(sl *SlotSpec, ch *CheckSpec) bool { return sl.Mode == Required && ch.Mode == Required }

// status is the claim's state: its end if terminal, else its stage.
func (c *claimRec) status() Status {
	if c.end != nil {
		return c.end.State
	}
	return c.stage
}

func (c *claimRec) advance(to Status) {
	if stageRank[to] > stageRank[c.stage] {
		c.stage = to
	}
}

// isEvaluator reports whether id is the designated evaluator of any check.
func (c *claimRec) isEvaluator(id string) bool {
	for _, sl := range c.terms.Slots {
		for _, ch := range sl.Checks {
			if ch.Evaluator == id {
				return true
			}
		}
	}
	return false
}

// boundInReceived reports whether (artifact, digest) is bound to slot in a
// response testament the claimant has received.
func (c *claimRec) boundInReceived(slot, art, digest string) bool {
	for _, tid := range c.tOrder {
		t := c.testaments[tid]
		if t.role != TestamentResponse || t.recvd == 0 {
			continue
		}
		if b, ok := t.binding(slot); ok && b.Artifact == art && b.Digest == digest {
			return true
		}
	}
	return false
}
