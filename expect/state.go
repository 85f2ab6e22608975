package expect

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"

	"tally/duequeue"
	"tally/instant"
)

// Meta is what the log knows about every record it hands to Apply.
type Meta struct {
	Seq   uint64    // position in the session's log
	Actor string    // the authenticated identity that appended it
	TS    time.Time // when it was appended
}

// Config holds a ledger's limits for this family. Every bound the core
// enforces is named here.
type Config struct {
	// LineageMax is the longest lineage (the first expectation and every
	// extension that supersedes it) an agent may build. Past it only a
	// participant marked as a person may extend.
	LineageMax int
	// Timekeeper is the identity of the watcher: the only actor that commits
	// lapses.
	Timekeeper string
	// SweepMax bounds the records one Sweep returns.
	SweepMax int
	// AfterMax bounds the expectations one step may name in "after".
	AfterMax int
	// TextMax bounds, in bytes, every free-text and key field of a command
	// (kind, expects, factKey, subject type and id, reason).
	TextMax int
}

// DefaultConfig returns the limits a new ledger starts with.
func DefaultConfig() Config {
	return Config{
		LineageMax: 3,
		Timekeeper: "watch",
		SweepMax:   10_000,
		AfterMax:   16,
		TextMax:    4096,
	}
}

// Validate reports the first limit out of its range, quoting the value.
func (c Config) Validate() error {
	switch {
	case c.LineageMax < 1:
		return fmt.Errorf("expect config: LineageMax is %d, must be at least 1", c.LineageMax)
	case c.Timekeeper == "":
		return fmt.Errorf("expect config: Timekeeper is empty, must name the watcher's identity")
	case c.SweepMax < 1:
		return fmt.Errorf("expect config: SweepMax is %d, must be at least 1", c.SweepMax)
	case c.AfterMax < 0:
		return fmt.Errorf("expect config: AfterMax is %d, must not be negative", c.AfterMax)
	case c.TextMax < IDMax || c.TextMax > textPackMax/nText:
		return fmt.Errorf("expect config: TextMax is %d, must be between %d and %d", c.TextMax, IDMax, textPackMax/nText)
	}
	return nil
}

// Life is an expectation's computed state. Printed by show --json: do not
// rename.
type Life uint8

const (
	Open       Life = iota // raised, not yet satisfied, withdrawn or superseded
	Satisfied              // a fact with its key was recorded
	Withdrawn              // withdrawn, by request or because its origin task ended badly
	Superseded             // replaced by a newer expectation in its lineage
)

var lifeNames = [...]string{"open", "satisfied", "withdrawn", "superseded"}

func (l Life) String() string { return lifeNames[l] }

// ParseLife reads a state name as printed.
func ParseLife(s string) (Life, bool) {
	for i, n := range lifeNames {
		if n == s {
			return Life(i), true
		}
	}
	return 0, false
}

// Text fields of an expectation, packed into one string (see expectation).
const (
	tID = iota
	tSubjectID
	tExpects
	tFactKey
	tTask
	tContext
	tAnchor
	tSupersedes
	nText
)

// textPackMax is the most text one expectation can pack (uint16 offsets).
const textPackMax = math.MaxUint16

// Flags of an expectation.
const (
	flagHuman           uint8 = 1 << iota // raised by a person
	flagReanchored                        // currentDue follows the anchor's actual time
	flagOriginClosed                      // its origin task was cancelled or failed
	flagStalledClear                      // a fact on the subject rules stalled out (cache)
	flagSkippedRecorded                   // a skipped lapse is recorded
	flagStalledRecorded                   // a stalled lapse is recorded
)

// expectation is the folded form of one raised expectation. It is packed to
// keep an open expectation small (the goal is at most 512 bytes resident,
// maps and deadline index included): times are Unix nanoseconds, shared
// names are interned symbols, per-expectation text lives in one string, and
// rarely used fields hang off extra.
//
// Invariant: projectedDue == the raise's dueAt; currentDue == projectedDue
// unless flagReanchored.
// Invariant: an expectation is in its fact key's chain and its task's chain
// exactly while life == Open.
// Invariant: an expectation is in the deadline index exactly while it has a
// lapse pending (see pending).
type expectation struct {
	text string        // the nText fields, concatenated
	ends [nText]uint16 // ends[i] is where field i ends in text

	kind, subjectType, by uint32 // interned symbols
	slot                  int32  // the deadline index's position + 1 (0: not in the index)
	basis                 uint8  // index into bases
	life                  Life
	flags                 uint8

	order        uint64 // the fold's position when raised: orders facts against the raise
	raisedAt     int64
	projectedDue int64
	currentDue   int64
	grace        int64
	horizon      int64 // 0: none
	anchorOffset int64
	satisfiedAt  int64 // the satisfying fact's "at", when life == Satisfied
	skippedAt    int64 // 0: no later step satisfied while open

	nextSameKey  *expectation // chain of open expectations waiting for one fact key
	nextSameTask *expectation // chain of open expectations raised on one task
	extra        *extra
}

// extra holds what few expectations need.
type extra struct {
	after          []string
	parent, child  *expectation // supersedes / superseded by
	lapses         []recordedLapse
	closedAt       int64 // when withdrawn or superseded
	closedBy       string
	withdrawReason string
	reanchoredAt   int64
	replyTo        *ReplyTo
	producer       string // the seat expected to produce the fact
}

type recordedLapse struct {
	id       string
	kind     LapseKind
	due      int64
	lapsedAt int64
	noticed  int64
	by       string
	seq      uint64
}

func (x *expectation) field(i int) string {
	start := 0
	if i > 0 {
		start = int(x.ends[i-1])
	}
	return x.text[start:x.ends[i]]
}

func (x *expectation) id() string { return x.field(tID) }

func (x *expectation) ext() *extra {
	if x.extra == nil {
		x.extra = &extra{}
	}
	return x.extra
}

func (x *expectation) parent() *expectation {
	if x.extra == nil {
		return nil
	}
	return x.extra.parent
}

func (x *expectation) child() *expectation {
	if x.extra == nil {
		return nil
	}
	return x.extra.child
}

// head follows supersessions from x to the newest member of its lineage.
func head(x *expectation) *expectation {
	for x != nil && x.child() != nil {
		x = x.child()
	}
	return x
}

// depth is the number of expectations in x's lineage up to and including x.
func depth(x *expectation) int {
	n := 0
	for ; x != nil; x = x.parent() {
		n++
	}
	return n
}

type factMark struct {
	order uint64 // the fold's position when the fact was applied
	at    int64
}

// State is the folded state of the expectations family: what every raised
// expectation is, what facts arrived, which lapses are recorded and which
// are pending. Build it with NewState and change it only with Apply; Decide
// and the views never change it, and Sweep changes only its index cache.
// A State is not safe for concurrent use.
type State struct {
	cfg Config

	byID      map[string]*expectation
	byFactKey map[string]*expectation   // head of the chain of open expectations per key
	byTask    map[string]*expectation   // head of the chain of open expectations per origin task
	anchored  map[string][]*expectation // anchor expectation id → the steps anchored on it

	factFirst    map[string]int64       // fact key → "at" of the first fact with that key
	subjectFacts map[Subject][]factMark // every fact per subject, in fold order
	tasks        map[string]Outcome     // origin task → its first recorded outcome

	// pendingWithdraw holds open expectations whose origin task ended badly
	// and whose withdrawal is not recorded yet; Sweep returns it.
	pendingWithdraw map[*expectation]struct{}

	// index holds every expectation with a lapse pending, at the earliest
	// instant one falls due.
	index *duequeue.Index[*expectation]

	symbols map[string]uint32
	names   []string

	order uint64 // events applied
	lapse []*expectation
	lapsi []int32 // lapse log: lapse[i].extra.lapses[lapsi[i]], in fold order
}

// NewState returns an empty state. A config that fails Validate panics:
// the caller validates configs when it reads them.
func NewState(cfg Config) *State {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &State{
		cfg:             cfg,
		byID:            make(map[string]*expectation),
		byFactKey:       make(map[string]*expectation),
		byTask:          make(map[string]*expectation),
		anchored:        make(map[string][]*expectation),
		factFirst:       make(map[string]int64),
		subjectFacts:    make(map[Subject][]factMark),
		tasks:           make(map[string]Outcome),
		pendingWithdraw: make(map[*expectation]struct{}),
		index:           duequeue.NewWithSlots(lessExpectation, func(x *expectation) *int32 { return &x.slot }),
		symbols:         make(map[string]uint32),
	}
}

// Config returns the limits the state was built with.
func (s *State) Config() Config { return s.cfg }

// lessExpectation orders expectations in the index that fall due together:
// by when they were raised, which is unique.
func lessExpectation(a, b *expectation) bool { return a.order < b.order }

func (s *State) intern(name string) uint32 {
	if i, ok := s.symbols[name]; ok {
		return i
	}
	i := uint32(len(s.names))
	s.names = append(s.names, name)
	s.symbols[name] = i
	return i
}

func (s *State) name(i uint32) string { return s.names[i] }

func (s *State) subject(x *expectation) Subject {
	return Subject{Type: s.name(x.subjectType), ID: x.field(tSubjectID)}
}

// nanos and fromNanos convert between time.Time and the packed form: an
// int64 ordered as the times are, with 0 kept for "none" (the zero time).
// It is instant.Pack moved up by one from 0 on, so that the Unix epoch,
// which instant.Pack packs to 0, is an instant like any other.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return shift(instant.Pack(t))
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return instant.Unpack(unshift(n))
}

// addNanos is the packed form of fromNanos(n).Add(d) (instant.Add).
func addNanos(n int64, d time.Duration) int64 { return shift(instant.Add(unshift(n), d)) }

func shift(p int64) int64 {
	if p >= 0 && p < math.MaxInt64 {
		return p + 1
	}
	return p
}

func unshift(n int64) int64 {
	if n > 0 && n < math.MaxInt64 {
		return n - 1
	}
	return n
}

// timeProblem is the rule t breaks to be packed (instant.Problem), or "".
// The zero time is none.
func timeProblem(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return instant.Problem(t)
}

// inRange reports whether t can be packed (timeProblem says why not).
func inRange(t time.Time) bool { return timeProblem(t) == "" }

// LapseID is the deterministic id of a lapse: the same expectation, kind
// and due time in force give the same id, so a watcher that notices a lapse
// twice records it once. It doubles as the lapse task's A2A messageId.
func LapseID(expectationID string, kind LapseKind, due time.Time) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range []string{"tally/expect/lapse/v1", expectationID, string(kind), instant.Format(due)} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	return "lps_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// Apply folds one record into the state. It never fails: a record that is
// malformed, names what the ledger does not hold, or contradicts it (a
// second raise of one id, a withdrawal of a closed expectation) changes
// nothing, so records written by other tools cannot corrupt the fold.
// Applying a recorded lapse a second time is a no-op. Records of other
// types are ignored.
//
// Policy that depends on the ledger's configuration (the lineage bound, the
// timekeeper's name) is enforced by Decide, not here, so that replay gives
// the same state after a configuration change.
func (s *State) Apply(m Meta, e Event) {
	if !Known(e.Type) || e.wellFormed() != nil {
		return
	}
	if !inRange(e.TS) {
		return
	}
	s.order++
	ts := e.TS
	if !m.TS.IsZero() && inRange(m.TS) {
		ts = m.TS
	}
	switch {
	case e.Raise != nil:
		s.applyRaise(m, ts, e.Raise)
	case e.Withdraw != nil:
		s.applyWithdraw(ts, e.Withdraw)
	case e.Fact != nil:
		s.applyFact(e.TS, e.Fact)
	case e.Lapse != nil:
		s.applyLapse(m, ts, e.Lapse)
	case e.TaskOutcome != nil:
		s.applyTaskOutcome(e.TaskOutcome)
	}
}

// raiseProblem says why a raise cannot be folded, given the ledger; "" when
// it can. Decide reports the same problems as refusals.
func (s *State) raiseProblem(r *Raise) (code, field, rule string) {
	switch {
	case !validID(r.ExpectationID):
		return "invalid", "expectationId", fmt.Sprintf("must be 1..%d characters without whitespace", IDMax)
	case !inRange(r.DueAt):
		return "invalid", "dueAt", timeProblem(r.DueAt)
	case !inRange(r.Horizon):
		return "invalid", "horizon", timeProblem(r.Horizon)
	case r.Grace < 0 || r.Grace > durationMax:
		return "invalid", "grace", "must be a duration between zero and a century"
	case !r.DueAt.IsZero() && !inRange(r.DueAt.Add(r.Grace)):
		// The lapse falls due at dueAt + grace: it must be kept exactly too.
		return "invalid", "grace", "dueAt + grace " + timeProblem(r.DueAt.Add(r.Grace))
	case !r.Horizon.IsZero() && r.Horizon.Before(r.DueAt):
		return "invalid", "horizon", "must not be before dueAt"
	case r.Producer != "" && (strings.TrimSpace(r.Producer) != r.Producer || len(r.Producer) > IDMax):
		return "invalid", "producer", fmt.Sprintf("must be a seat of 1..%d characters without surrounding whitespace", IDMax)
	}
	if _, ok := s.byID[r.ExpectationID]; ok {
		return "conflict", "expectationId", "already raised: an expectation is immutable once raised"
	}
	if a := r.Anchor; a != nil {
		switch {
		case a.Offset < 0 || a.Offset > durationMax:
			return "invalid", "anchor.offset", "must be a duration between zero and a century"
		case a.ExpectationID == r.ExpectationID:
			return "invalid", "anchor.expectationId", "must name another expectation"
		case s.byID[a.ExpectationID] == nil:
			return "not_found", "anchor.expectationId", "names no expectation in this ledger"
		}
	}
	for i, id := range r.After {
		switch {
		case !validID(id):
			return "invalid", "after", "must hold expectation ids"
		case id == r.ExpectationID:
			return "invalid", "after", "must name other expectations"
		}
		for _, earlier := range r.After[:i] {
			if earlier == id {
				return "invalid", "after", "names " + id + " twice"
			}
		}
		prev := s.byID[id]
		if prev == nil {
			return "not_found", "after", "names " + id + ", which is not in this ledger"
		}
		if s.subject(prev) != r.Subject {
			return "invalid", "after", "names " + id + ", a step on another subject"
		}
	}
	if r.Supersedes != "" {
		prev := s.byID[r.Supersedes]
		switch {
		case prev == nil:
			return "not_found", "supersedes", "names no expectation in this ledger"
		case prev.life != Open:
			return "conflict", "supersedes", "names a " + prev.life.String() + " expectation: only an open one can be extended"
		case s.subject(prev) != r.Subject:
			return "invalid", "subject", "must be the subject of the expectation it supersedes"
		}
		for a := prev; a != nil; a = a.parent() {
			if s.sameTerms(a, r) {
				return "conflict", "supersedes", "identical to ancestor " + a.id() + ": an extension must change something"
			}
		}
	}
	total := 0
	for _, f := range r.texts() {
		total += len(f)
	}
	if total > textPackMax {
		return "invalid", "expects", "the expectation's text is too long"
	}
	return "", "", ""
}

// texts returns a raise's packed text fields, in expectation field order.
func (r *Raise) texts() [nText]string {
	var anchor string
	if r.Anchor != nil {
		anchor = r.Anchor.ExpectationID
	}
	return [nText]string{
		tID: r.ExpectationID, tSubjectID: r.Subject.ID, tExpects: r.Expects,
		tFactKey: r.FactKey, tTask: r.Origin.TaskID, tContext: r.Origin.ContextID,
		tAnchor: anchor, tSupersedes: r.Supersedes,
	}
}

// sameTerms reports whether raise r states exactly what x stated: every
// term but the ids, the origin and who raised it.
func (s *State) sameTerms(x *expectation, r *Raise) bool {
	old := s.raiseOf(x)
	if (old.Anchor == nil) != (r.Anchor == nil) || (old.Anchor != nil && *old.Anchor != *r.Anchor) {
		return false
	}
	if len(old.After) != len(r.After) {
		return false
	}
	for i := range old.After {
		if old.After[i] != r.After[i] {
			return false
		}
	}
	return old.Kind == r.Kind && old.Subject == r.Subject && old.Expects == r.Expects &&
		old.FactKey == r.FactKey && old.DueAt.Equal(r.DueAt) && old.Grace == r.Grace &&
		old.Horizon.Equal(r.Horizon) && old.Basis == r.Basis && old.Producer == r.Producer
}

// raiseOf rebuilds the raise that created x.
func (s *State) raiseOf(x *expectation) Raise {
	r := Raise{
		ExpectationID: x.id(),
		Kind:          s.name(x.kind),
		Subject:       s.subject(x),
		Expects:       x.field(tExpects),
		FactKey:       x.field(tFactKey),
		DueAt:         fromNanos(x.projectedDue),
		Grace:         time.Duration(x.grace),
		Horizon:       fromNanos(x.horizon),
		Basis:         bases[x.basis],
		Supersedes:    x.field(tSupersedes),
		Origin:        Origin{TaskID: x.field(tTask), ContextID: x.field(tContext)},
		By:            s.name(x.by),
		Human:         x.flags&flagHuman != 0,
	}
	if id := x.field(tAnchor); id != "" {
		r.Anchor = &Anchor{ExpectationID: id, Offset: time.Duration(x.anchorOffset)}
	}
	if x.extra != nil {
		r.After = x.extra.after
		if x.extra.replyTo != nil {
			rt := *x.extra.replyTo
			r.ReplyTo = &rt
		}
		r.Producer = x.extra.producer
	}
	return r
}

func (s *State) applyRaise(m Meta, ts time.Time, r *Raise) {
	if code, _, _ := s.raiseProblem(r); code != "" {
		return
	}
	texts := r.texts()
	x := &expectation{
		kind:         s.intern(r.Kind),
		subjectType:  s.intern(r.Subject.Type),
		by:           s.intern(r.By),
		basis:        basisCode(r.Basis),
		order:        s.order,
		raisedAt:     nanos(ts),
		projectedDue: nanos(r.DueAt),
		currentDue:   nanos(r.DueAt),
		grace:        int64(r.Grace),
		horizon:      nanos(r.Horizon),
	}
	n := 0
	for _, f := range texts {
		n += len(f)
	}
	buf := make([]byte, 0, n)
	for i, f := range texts {
		buf = append(buf, f...)
		x.ends[i] = uint16(len(buf))
	}
	x.text = string(buf)
	if r.Human {
		x.flags |= flagHuman
	}
	if r.Anchor != nil {
		x.anchorOffset = int64(r.Anchor.Offset)
	}
	if len(r.After) > 0 {
		x.ext().after = append([]string(nil), r.After...)
	}
	if r.Producer != "" {
		x.ext().producer = r.Producer
	}
	if r.ReplyTo != nil {
		rt := *r.ReplyTo
		x.ext().replyTo = &rt
	}
	s.byID[x.id()] = x

	if r.Supersedes != "" {
		prev := s.byID[r.Supersedes]
		s.close(prev, Superseded, ts, r.By)
		prev.ext().child = x
		x.ext().parent = prev
	}
	if task := r.Origin.TaskID; task != "" {
		x.nextSameTask = s.byTask[task]
		s.byTask[task] = x
		if s.tasks[task].withdraws() {
			x.flags |= flagOriginClosed
			s.pendingWithdraw[x] = struct{}{}
		}
	}
	if r.Anchor != nil {
		id := r.Anchor.ExpectationID
		s.anchored[id] = append(s.anchored[id], x)
		if a := head(s.byID[id]); a.life == Satisfied {
			s.reanchor(x, a.satisfiedAt)
		}
	}
	if at, ok := s.factFirst[r.FactKey]; ok {
		s.satisfy(x, at)
	} else {
		key := x.field(tFactKey)
		x.nextSameKey = s.byFactKey[key]
		s.byFactKey[key] = x
	}
	s.reindex(x)
}

// bases are the stored bases, indexed by expectation.basis.
var bases = [...]Basis{BasisObserved, BasisContract, BasisDeclared}

func basisCode(b Basis) uint8 {
	for i, v := range bases {
		if v == b {
			return uint8(i)
		}
	}
	panic("expect: unknown basis " + string(b))
}

// unlink removes x from the open chains (fact key and task).
func (s *State) unlink(x *expectation) {
	unchain(s.byFactKey, x.field(tFactKey), x, func(e *expectation) **expectation { return &e.nextSameKey })
	if task := x.field(tTask); task != "" {
		unchain(s.byTask, task, x, func(e *expectation) **expectation { return &e.nextSameTask })
	}
	delete(s.pendingWithdraw, x)
}

// unchain removes x from the chain heads[key] whose links next names,
// dropping the key with its last member.
func unchain(heads map[string]*expectation, key string, x *expectation, next func(*expectation) **expectation) {
	if p := heads[key]; p == x {
		if *next(x) == nil {
			delete(heads, key)
		} else {
			heads[key] = *next(x)
		}
	} else {
		for ; p != nil; p = *next(p) {
			if *next(p) == x {
				*next(p) = *next(x)
				break
			}
		}
	}
	*next(x) = nil
}

// close ends an open expectation by withdrawal or supersession: no lapse
// is pending for it afterwards.
func (s *State) close(x *expectation, life Life, ts time.Time, by string) {
	if x.life != Open || (life != Withdrawn && life != Superseded) {
		panic("expect: close of a " + x.life.String() + " expectation as " + life.String())
	}
	s.unlink(x)
	x.life = life
	x.ext().closedAt = nanos(ts)
	x.extra.closedBy = by
	s.index.Delete(x)
}

// satisfy records that a fact with x's key happened at at.
func (s *State) satisfy(x *expectation, at int64) {
	if x.life != Open {
		panic("expect: satisfy of a " + x.life.String() + " expectation")
	}
	s.unlink(x)
	x.life = Satisfied
	x.satisfiedAt = at
	// Steps anchored on x, or on any expectation x superseded, now follow
	// x's actual time.
	for a := x; a != nil; a = a.parent() {
		for _, d := range s.anchored[a.id()] {
			if d.life == Open {
				s.reanchor(d, at)
				s.reindex(d)
			}
		}
	}
	// Earlier steps x follows that are still open were skipped.
	if x.extra != nil {
		subject := s.subject(x)
		for _, id := range x.extra.after {
			p := head(s.byID[id])
			if p == nil || p.life != Open || p.flags&flagOriginClosed != 0 || s.subject(p) != subject {
				continue
			}
			if p.skippedAt == 0 || at < p.skippedAt {
				p.skippedAt = at
				s.reindex(p)
			}
		}
	}
	s.reindex(x)
}

func (s *State) reanchor(x *expectation, anchorAt int64) {
	x.currentDue = addNanos(anchorAt, time.Duration(x.anchorOffset))
	x.flags |= flagReanchored
	x.ext().reanchoredAt = anchorAt
}

func (s *State) applyWithdraw(ts time.Time, w *Withdraw) {
	x := s.byID[w.ExpectationID]
	if x == nil || x.life != Open {
		return
	}
	s.close(x, Withdrawn, ts, w.By)
	x.extra.withdrawReason = w.Reason
}

func (s *State) applyFact(ts time.Time, f *Fact) {
	at := f.At
	if at.IsZero() {
		at = ts
	}
	if !inRange(at) {
		return
	}
	n := nanos(at)
	if _, ok := s.factFirst[f.FactKey]; !ok {
		s.factFirst[f.FactKey] = n
	}
	s.subjectFacts[f.Subject] = append(s.subjectFacts[f.Subject], factMark{order: s.order, at: n})
	x := s.byFactKey[f.FactKey]
	for x != nil {
		next := x.nextSameKey
		s.satisfy(x, n)
		x = next
	}
}

func (s *State) applyLapse(m Meta, ts time.Time, l *Lapse) {
	// Only a lapse the log authenticates as appended by the identity it
	// names is folded: one imported from another tool's file (no appender)
	// or written by anyone else in the timekeeper's name is kept in the log
	// but changes nothing. Decide alone admits the timekeeper, so this
	// holds whatever the configuration was when the log was written.
	if m.Actor == "" || m.Actor != l.By {
		return
	}
	x := s.byID[l.ExpectationID]
	if x == nil || x.life == Withdrawn || x.life == Superseded {
		return
	}
	if !inRange(l.DueAt) || !inRange(l.LapsedAt) || l.LapseID != LapseID(x.id(), l.Kind, l.DueAt) {
		return
	}
	if s.recorded(x, l.Kind, nanos(l.DueAt)) {
		return
	}
	e := x.ext()
	e.lapses = append(e.lapses, recordedLapse{
		id: l.LapseID, kind: l.Kind, due: nanos(l.DueAt), lapsedAt: nanos(l.LapsedAt),
		noticed: nanos(ts), by: l.By, seq: m.Seq,
	})
	switch l.Kind {
	case LapseSkipped:
		x.flags |= flagSkippedRecorded
	case LapseStalled:
		x.flags |= flagStalledRecorded
	}
	s.lapse = append(s.lapse, x)
	s.lapsi = append(s.lapsi, int32(len(e.lapses)-1))
	s.reindex(x)
}

// recorded reports whether x already has this lapse: an overdue lapse once
// per due time in force, a skipped or stalled lapse once per expectation.
func (s *State) recorded(x *expectation, kind LapseKind, due int64) bool {
	switch kind {
	case LapseSkipped:
		return x.flags&flagSkippedRecorded != 0
	case LapseStalled:
		return x.flags&flagStalledRecorded != 0
	}
	if x.extra == nil {
		return false
	}
	for _, l := range x.extra.lapses {
		if l.kind == kind && l.due == due {
			return true
		}
	}
	return false
}

func (s *State) applyTaskOutcome(o *TaskOutcome) {
	if _, ok := s.tasks[o.TaskID]; ok {
		return // the first outcome recorded wins
	}
	s.tasks[o.TaskID] = o.Outcome
	if !o.Outcome.withdraws() {
		return
	}
	for x := s.byTask[o.TaskID]; x != nil; x = x.nextSameTask {
		x.flags |= flagOriginClosed
		s.pendingWithdraw[x] = struct{}{}
		s.index.Delete(x)
	}
}

// candidate is a lapse that falls due at lapsedAt unless something rules it
// out first.
type candidate struct {
	kind     LapseKind
	lapsedAt int64
}

// pending returns x's unrecorded lapses in the order they fall due. A
// lapse falls due at its instant only if x was still open then: a late
// satisfaction does not undo it; a withdrawal or supersession does (no lapse
// afterwards), and so does the end of its origin task by cancellation or
// failure. Stalled candidates still need the subject check (heard).
func (s *State) pending(x *expectation) []candidate {
	if x.life == Withdrawn || x.life == Superseded || x.flags&flagOriginClosed != 0 {
		return nil
	}
	// A satisfied expectation left its task's chain, but a lapse it owes
	// from before is still for cancelled work once the task ends badly.
	if task := x.field(tTask); task != "" && x.life == Satisfied && s.tasks[task].withdraws() {
		return nil
	}
	openAt := func(at int64) bool { return x.life == Open || x.satisfiedAt > at }
	var out []candidate
	if at := addNanos(x.currentDue, time.Duration(x.grace)); openAt(at) && !s.recorded(x, LapseOverdue, x.currentDue) {
		out = append(out, candidate{LapseOverdue, at})
	}
	if at := x.skippedAt; at != 0 && openAt(at) && x.flags&flagSkippedRecorded == 0 {
		out = append(out, candidate{LapseSkipped, at})
	}
	if at := x.horizon; at != 0 && openAt(at) && x.flags&(flagStalledRecorded|flagStalledClear) == 0 {
		out = append(out, candidate{LapseStalled, at})
	}
	// At most three: insertion sort by (instant, kind).
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].lapsedAt < out[j-1].lapsedAt ||
			out[j].lapsedAt == out[j-1].lapsedAt && out[j].kind.rank() < out[j-1].kind.rank()); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// heard reports whether any fact on x's subject, recorded after x was
// raised, happened by x's horizon: such a fact rules stalled out.
func (s *State) heard(x *expectation) bool {
	facts := s.subjectFacts[s.subject(x)]
	for i := len(facts) - 1; i >= 0 && facts[i].order > x.order; i-- {
		if facts[i].at <= x.horizon {
			return true
		}
	}
	return false
}

// reindex puts x in the deadline index at its earliest pending lapse, or
// takes it out.
func (s *State) reindex(x *expectation) {
	c := s.pending(x)
	if len(c) == 0 {
		s.index.Delete(x)
		return
	}
	s.index.Set(x, fromNanos(c[0].lapsedAt))
}
