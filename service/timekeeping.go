package service

import (
	"context"
	"time"

	"tally/expect"
)

// Timekeeping is what a session's timekeeper (package timekeeper) asks of
// the Service besides the verbs: what is due, the sweeps that commit it,
// the log's lapses and promises as it gains them, and where the session's
// deliveries journal is kept. ledgerservice.Local implements it over the
// ledgers it opens, and a cluster node over its replica, its sweeps
// proposed to the session's group; the REST client does not (a timekeeper
// runs where the session's log is).
type Timekeeping interface {
	// Due is what c's session owes its timekeeper at c.Now (zero: the
	// Service's clock, which Due.At reports): whether an expectation's
	// withdrawal or lapse is due, and whether a claim's deadline passed
	// with no fact yet. A session without a log is refused NoSuchSession.
	Due(ctx context.Context, c Call) (Due, error)
	// Sweep commits, as the timekeeper identity and at the session's
	// clock, at most max of what is due of kind: SweepExpectations (the
	// withdrawals and lapses) or SweepClaims (the claims' deadline facts:
	// Expired, or Deadlocked for a wait cycle's victim). It is decided
	// under the log's lock, so two timekeepers sweeping at once, or one
	// sweep committed twice, never record a fact twice.
	Sweep(ctx context.Context, c Call, kind string, max int) (Swept, error)
	// Timeline is what c's session's log gained after since: the lapses
	// recorded and the promises whose records it holds. From the zero
	// Cursor, or from one that does not continue the log (a replica that
	// installed another copy of it), it is everything the session holds,
	// with Reset set. It reads up to what is durable.
	Timeline(ctx context.Context, c Call, since Cursor) (Timeline, error)
	// PromiseTimes is what a promise's escalation ladder needs of each of
	// ids that c's session holds (an id it does not hold is left out).
	PromiseTimes(ctx context.Context, c Call, ids []string) (map[string]PromiseTime, error)
	// JournalDir is the directory, on this machine, of c's session's
	// deliveries journal: beside its log and never in it, since what was
	// delivered from here is this machine's to know.
	JournalDir(ctx context.Context, c Call) (string, error)
}

// The kinds of Timekeeping.Sweep.
const (
	SweepExpectations = "expectations"
	SweepClaims       = "claims"
)

// Due is what a session owes its timekeeper at At.
type Due struct {
	At           time.Time
	Expectations bool // a withdrawal or lapse is due: Sweep(SweepExpectations) has work
	Claims       bool // a claim deadline passed with no fact: Sweep(SweepClaims) has work
}

// Swept is what one Sweep committed.
type Swept struct {
	Withdrawals int // expectations withdrawn (their origin task ended badly)
	Lapses      int // lapse records
	ClaimFacts  int // claim deadline and deadlock facts
}

// Count is every record the sweep committed.
func (s Swept) Count() int { return s.Withdrawals + s.Lapses + s.ClaimFacts }

// Cursor is how far a timekeeper read a session's log: the line count,
// its byte offset and the chain hash there, so a cursor that does not
// continue the log is told from one that does.
type Cursor struct {
	Seq    uint64
	Offset int64
	Hash   [32]byte
}

// Timeline is what a log gained after a cursor.
type Timeline struct {
	// To is the cursor after what was read; Reset says it was read from
	// the start (the cursor given was zero, or did not continue the log).
	To    Cursor
	Reset bool
	// Lapses are the lapse records read, in log order, each with its
	// expectation as the session holds it now.
	Lapses []Lapsed
	// Promises are the promises whose records were read, as the session
	// holds them now, in no order.
	Promises map[string]PromiseTime
}

// Lapsed is one recorded lapse and what a notice of it says of its
// expectation.
type Lapsed struct {
	Lapse expect.LapseView
	// Expectation is the lapsed expectation's view, nil if the session
	// does not hold it; ReplyTo is where its raising agent takes its
	// lapses over A2A, push token included (nil when raised without one).
	Expectation *expect.View
	ReplyTo     *expect.ReplyTo
}

// PromiseTime is what a promise's escalation ladder needs: whom it binds,
// its standing, what it waits on, and its deadline in force.
type PromiseTime struct {
	ID, Text, By, To string
	// Standing is StandingOwed, StandingConditional (waiting on On) or
	// StandingEnded (resolved or expired: its notices stop).
	Standing string
	On       string
	// Horizon is 1 for the declared deadline, n+1 after n amends; Deadline
	// is that horizon's.
	Horizon  int
	Deadline time.Time
}

// The standings of a PromiseTime.
const (
	StandingOwed        = "owed"
	StandingConditional = "conditional"
	StandingEnded       = "ended"
)
