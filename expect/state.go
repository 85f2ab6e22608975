package expect

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
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
	// Timekeeper is the identity of the timekeeper: the only actor that commits
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
// and due time in force give the same id, so a timekeeper that notices a lapse
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
