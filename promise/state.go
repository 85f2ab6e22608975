package promise

import (
	"time"

	"tally/duequeue"
	"tally/instant"
)

// Status is a promise's computed state. Printed and stored in checkpoints:
// do not rename.
type Status string

const (
	Conditional Status = "conditional" // waiting on an antecedent that has not landed
	Owed        Status = "owed"        // detached: the debtor owes it now
	Satisfied   Status = "satisfied"
	Cancelled   Status = "cancelled"
	Released    Status = "released"
	Expired     Status = "expired" // its antecedent can no longer land
)

// Resolved reports whether the status ends the promise.
func (s Status) Resolved() bool {
	return s == Satisfied || s == Cancelled || s == Released
}

// Open reports whether the promise is still owed or may yet become owed.
func (s Status) Open() bool { return s == Conditional || s == Owed }

// Meta is what the log knows about a record beyond its own fields.
type Meta struct {
	Seq   uint64 // position in the session log, from 1
	Actor string // acting identity when it differs from the record's party
}

// Promise is the folded record of one promise.
//
// Invariant: Horizons is never empty; its last element is the current
// deadline. Invariant: Resolution, once set, never changes.
type Promise struct {
	ID, Text, By, To, On, Task string
	Meta                       string // raw JSON object or ""
	Seq                        uint64 // sequence of the declaration
	Declared                   int64  // declaration ts, packed (instant.Pack)
	Horizons                   []int64
	Resolution                 *Resolution
	Assessments                []Assessment

	gen uint32 // the state's gen when made or last copied: a Frozen view taken since may hold it
}

// Until is the current deadline.
func (p *Promise) Until() time.Time { return instant.Unpack(p.Horizons[len(p.Horizons)-1]) }

// Resolution is the first resolve record of a promise.
type Resolution struct {
	As       string
	By       string
	Evidence []string
	Reason   string
	At       int64 // packed (instant.Pack)
	Seq      uint64
}

// Assessment is an observer's signed judgment, kept beside the promise.
type Assessment struct {
	Observer, State, Note, Meta string
	At                          int64
	Seq                         uint64
}

// State is the fold of a session's promise records.
type State struct {
	index idIndex // id → position in order
	// indexStale says index must be rebuilt from order before use (a state
	// loaded from a snapshot builds it only when an id is first looked up).
	indexStale bool

	// deadlines indexes unresolved promises by current deadline (position
	// in order → until). It is built by the second overdue query and kept
	// current by Apply after that; nil until then.
	deadlines      *duequeue.Index[int32]
	overdueQueries int
	order          []*Promise // declaration order
	names          map[string]string

	// gen counts Freeze calls, frozen the views still out. While one is
	// out, a promise made before the last Freeze is copied before it
	// changes (see writable).
	gen    uint32
	frozen int
}

// NewState returns an empty fold.
func NewState() *State {
	return &State{names: make(map[string]string)}
}

// Len is the number of declared promises.
func (s *State) Len() int { return len(s.order) }

// Get returns the promise with the given id.
func (s *State) Get(id string) (*Promise, bool) {
	i := s.lookup(id)
	if i < 0 {
		return nil, false
	}
	return s.order[i], true
}

// Each visits promises in declaration order until fn returns false.
func (s *State) Each(fn func(*Promise) bool) {
	for _, p := range s.order {
		if !fn(p) {
			return
		}
	}
}

// lookup returns the position of the promise with the given id in the
// declaration order, or -1.
func (s *State) lookup(id string) int {
	s.ensureIndex()
	return s.index.find(s.order, id)
}

// writable returns the promise at position i ready to be changed in place:
// a copy put in its place when a Frozen view may hold it.
func (s *State) writable(i int) *Promise {
	p := s.order[i]
	if s.frozen > 0 && p.gen != s.gen {
		c := *p
		c.gen = s.gen
		p = &c
		s.order[i] = p
	}
	return p
}

// ensureIndex builds the id index from the declaration order if it is stale.
func (s *State) ensureIndex() {
	if !s.indexStale {
		return
	}
	s.indexStale = false
	s.index = idIndex{slots: make([]uint64, sizeFor(len(s.order)))}
	for i := range s.order {
		// A snapshot never holds an id twice; if a damaged one did, the
		// first declaration wins, as in the fold.
		s.index.insert(s.order, i)
	}
}

// intern shares the storage of identities that recur on many records, which
// keeps a large ledger's memory per promise small.
func (s *State) intern(v string) string {
	if v == "" {
		return ""
	}
	if w, ok := s.names[v]; ok {
		return w
	}
	s.names[v] = v
	return v
}

// named interns v, a participant of e, unless decode did.
func (s *State) named(e *Event, v string) string {
	if e.named {
		return v
	}
	return s.intern(v)
}

// Apply folds one well-formed record into the state. It never fails: a
// record that cannot take effect (a second declaration of an id, an amend or
// resolve after the first resolve, anything about an unknown id) is ignored,
// exactly as pinki's fold ignores it; the log keeps it regardless.
func (s *State) Apply(m Meta, e *Event) {
	at := instant.Pack(e.TS)
	switch e.Type {
	case TypePromise:
		s.ensureIndex()
		// Insert first: the index refuses a second declaration of an id in
		// the same probe that places a new one.
		p := &Promise{ID: e.ID}
		s.order = append(s.order, p)
		if !s.index.insert(s.order, len(s.order)-1) {
			s.order[len(s.order)-1] = nil
			s.order = s.order[:len(s.order)-1]
			return // first declaration wins
		}
		*p = Promise{
			ID: e.ID, Text: e.Text, By: s.named(e, e.By), To: s.named(e, e.To),
			On: e.On, Task: e.Task, Meta: e.Meta, Seq: m.Seq, Declared: at,
			Horizons: []int64{e.untilNanos()}, gen: s.gen,
		}
		if s.deadlines != nil {
			s.deadlines.Set(int32(len(s.order)-1), p.Until())
		}
	case TypeAmend:
		i := s.lookup(e.ID)
		if i < 0 || s.order[i].Resolution != nil {
			return
		}
		p := s.writable(i)
		p.Horizons = append(p.Horizons, e.untilNanos())
		if s.deadlines != nil {
			s.deadlines.Set(int32(i), p.Until())
		}
	case TypeResolve:
		i := s.lookup(e.ID)
		if i < 0 || s.order[i].Resolution != nil {
			return // first resolve wins
		}
		if s.deadlines != nil {
			s.deadlines.Delete(int32(i))
		}
		s.writable(i).Resolution = &Resolution{
			As: e.As, By: s.named(e, e.By), Evidence: e.Evidence, Reason: e.Reason, At: at, Seq: m.Seq,
		}
	case TypeAssess:
		i := s.lookup(e.ID)
		if i < 0 {
			return
		}
		p := s.writable(i)
		p.Assessments = append(p.Assessments, Assessment{
			Observer: s.named(e, e.Observer), State: e.State, Note: e.Note, Meta: e.Meta, At: at, Seq: m.Seq,
		})
	}
}

// untilNanos is the event's deadline, parsed once by Decode or here for an
// event built in memory (by Decide).
func (e *Event) untilNanos() int64 {
	if e.untilSet {
		return e.until
	}
	t, rule := instant.Read(e.Until)
	if rule == instant.SyntaxRule {
		panic("promise: unvalidated time reached the fold: " + e.Until)
	}
	return instant.Pack(t)
}

// Status computes a promise's state from the fold (pinki's rules):
// resolution wins; no antecedent → owed; unknown antecedent or a cycle →
// conditional; antecedent satisfied → owed; antecedent cancelled, released
// or expired → expired (transitively); antecedent open → conditional.
func (s *State) Status(p *Promise) Status {
	if p.Resolution != nil {
		return Status(p.Resolution.As)
	}
	if p.On == "" {
		return Owed
	}
	// Walk the antecedent chain iteratively (chains may be long), then fold
	// the result back along it.
	chain := make([]*Promise, 0, 4)
	var onChain map[*Promise]bool // for long chains, where a linear search would be quadratic
	cur := p
	var base Status
	for {
		chain = append(chain, cur)
		if onChain != nil {
			onChain[cur] = true
		} else if len(chain) > 16 {
			onChain = make(map[*Promise]bool, 64)
			for _, c := range chain {
				onChain[c] = true
			}
		}
		a, ok := s.Get(cur.On)
		if !ok {
			base = "" // unknown antecedent: the last link is conditional
			break
		}
		if a.Resolution != nil {
			base = Status(a.Resolution.As)
			break
		}
		if a.On == "" {
			base = Owed
			break
		}
		if (onChain != nil && onChain[a]) || (onChain == nil && contains(chain, a)) {
			return Conditional // a cycle never lands
		}
		cur = a
	}
	st := Conditional
	if base != "" {
		st = derive(base)
	}
	for i := len(chain) - 2; i >= 0; i-- {
		st = derive(st)
	}
	return st
}

// derive is the state of a promise whose antecedent is in state a.
func derive(a Status) Status {
	switch a {
	case Satisfied:
		return Owed
	case Cancelled, Released, Expired:
		return Expired
	default:
		return Conditional
	}
}

func contains(chain []*Promise, p *Promise) bool {
	for _, c := range chain {
		if c == p {
			return true
		}
	}
	return false
}

// Overdue is a view at now, never a stored state: owed, unresolved, and now
// strictly after the current deadline. A conditional promise is never overdue.
func (s *State) Overdue(p *Promise, now time.Time) bool {
	// The deadline first: it is one comparison, and most promises are not past it.
	return instant.Pack(now) > p.Horizons[len(p.Horizons)-1] && p.Resolution == nil && s.Status(p) == Owed
}
