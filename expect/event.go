package expect

import (
	"time"

	"tally/jsonline"
)

// Record types of the expectations family, as written in "type". Stored in
// every ledger: do not rename.
const (
	TypeRaise       = "expect.raise"
	TypeWithdraw    = "expect.withdraw"
	TypeFact        = "fact"
	TypeLapse       = "lapse"
	TypeTaskOutcome = "task.outcome"
)

// EnvelopeKey is the member tally's log adds to every line (seq, actor,
// hash). Decode skips it; it is never part of an Event.
const EnvelopeKey = "tally"

// IDMax bounds every identifier (expectation, task, lapse ids).
const IDMax = 128

// MembersMax bounds the members of one record or nested object, so a
// hostile line cannot make duplicate detection quadratic in its length.
const MembersMax = 256

// Basis says where a due time came from. Stored: do not rename.
type Basis string

const (
	BasisObserved Basis = "observed" // measured from how this lane really behaves
	BasisContract Basis = "contract" // taken from a contract or service level
	BasisDeclared Basis = "declared" // stated by the agent with no better source
)

func (b Basis) valid() bool {
	return b == BasisObserved || b == BasisContract || b == BasisDeclared
}

// LapseKind names one of the three ways an expectation goes unmet. Stored:
// do not rename.
type LapseKind string

const (
	// LapseOverdue: the current due time plus grace passed while unsatisfied.
	LapseOverdue LapseKind = "overdue"
	// LapseSkipped: a later step on the same subject (one whose after names
	// this expectation) was satisfied while this one was open.
	LapseSkipped LapseKind = "skipped"
	// LapseStalled: the horizon passed with no fact of any kind recorded on
	// the subject since the expectation was raised.
	LapseStalled LapseKind = "stalled"
)

func (k LapseKind) valid() bool {
	return k == LapseOverdue || k == LapseSkipped || k == LapseStalled
}

// rank orders lapse kinds that fall due at the same instant.
func (k LapseKind) rank() int {
	switch k {
	case LapseOverdue:
		return 0
	case LapseSkipped:
		return 1
	}
	return 2
}

// Outcome is an origin task's terminal outcome. Stored: do not rename.
type Outcome string

const (
	OutcomeCompleted Outcome = "completed"
	OutcomeCancelled Outcome = "cancelled" // withdraws the task's open expectations
	OutcomeFailed    Outcome = "failed"    // withdraws the task's open expectations
)

func (o Outcome) valid() bool {
	return o == OutcomeCompleted || o == OutcomeCancelled || o == OutcomeFailed
}

// withdraws reports whether this outcome withdraws open expectations.
func (o Outcome) withdraws() bool { return o == OutcomeCancelled || o == OutcomeFailed }

// Subject is what an expectation is about: "subject": {"type","id"}.
type Subject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// String renders the subject as the CLI writes it: TYPE:ID.
func (s Subject) String() string { return s.Type + ":" + s.ID }

// Anchor makes a step's current due follow its predecessor's actual time:
// "anchor": {"expectationId","offset"}.
type Anchor struct {
	ExpectationID string
	Offset        time.Duration // ISO 8601 duration on the wire, never negative
}

// Origin is the A2A task and context an expectation was raised on:
// "origin": {"taskId","contextId"}.
type Origin struct {
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
}

// Raise is the body of an expect.raise record: the draft's fields, the
// origin it was raised on and who raised it. Immutable once recorded.
type Raise struct {
	ExpectationID string        // "expectationId"
	Kind          string        // "kind"
	Subject       Subject       // "subject"
	Expects       string        // "expects": what is expected, in words (optional)
	FactKey       string        // "satisfiedBy": {"factKey"}: the exact key that satisfies
	DueAt         time.Time     // "dueAt": required; the projected due
	Grace         time.Duration // "grace": ISO 8601 duration, omitted when zero
	Anchor        *Anchor       // "anchor" (optional)
	After         []string      // "after": expectations this step follows (optional)
	Horizon       time.Time     // "horizon": zero when absent
	Basis         Basis         // "basis": required
	Supersedes    string        // "supersedes": the expectation this one extends (optional)
	Origin        Origin        // "origin" (optional; zero when absent)
	ReplyTo       *ReplyTo      // "replyTo": where lapses go over A2A (optional)
	By            string        // "by": who raised it
	Human         bool          // "human": raised by a person (written only when true)
	// Producer is the seat expected to produce the satisfying fact
	// (optional, written only when set): its prime lists the expectation.
	// A reader that predates it keeps the member as an unknown one.
	Producer string // "producer"
}

// Withdraw is the body of an expect.withdraw record.
type Withdraw struct {
	ExpectationID string // "expectationId"
	By            string // "by"
	Reason        string // "reason" (optional)
}

// Fact is the body of a fact record: a key observed on a subject.
type Fact struct {
	FactKey string    // "factKey"
	Subject Subject   // "subject"
	At      time.Time // "at": when it happened; defaults to ts when absent
	By      string    // "by": who observed it (optional)
}

// Lapse is the body of a lapse record, committed only by the timekeeper.
// The record's ts is the time the lapse was noticed.
type Lapse struct {
	LapseID       string    // "lapseId": LapseID(expectationId, lapse, dueAt)
	ExpectationID string    // "expectationId"
	Kind          LapseKind // "lapse"
	DueAt         time.Time // "dueAt": the due time in force when it lapsed
	LapsedAt      time.Time // "lapsedAt": the instant the lapse condition became true
	By            string    // "by": the timekeeper
}

// TaskOutcome is the body of a task.outcome record: an origin task ended.
type TaskOutcome struct {
	TaskID  string  // "taskId"
	Outcome Outcome // "outcome"
	By      string  // "by" (optional)
}

// Field is a member of a record that this package does not know, kept with
// its value's raw (compacted) bytes so Encode writes it back.
type Field = jsonline.Field

// Event is one decoded record of the family. Exactly one body pointer is
// set, the one matching Type.
type Event struct {
	TS          time.Time // "ts"
	Type        string    // "type"
	Raise       *Raise
	Withdraw    *Withdraw
	Fact        *Fact
	Lapse       *Lapse
	TaskOutcome *TaskOutcome
	Extra       []Field // unknown members in line order (never EnvelopeKey)
}

// Known reports whether typ is a record type of this family.
func Known(typ string) bool {
	switch typ {
	case TypeRaise, TypeWithdraw, TypeFact, TypeLapse, TypeTaskOutcome:
		return true
	}
	return false
}
