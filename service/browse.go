package service

import (
	"context"
	"encoding/json"
	"time"
)

// Browse is what the console reads besides the families' verbs: the
// sessions that hold a log, and one record's history. ledgerservice.Local
// implements it over the sessions it opens; a server serves it from its
// own files (on a cluster node, its replica's as applied, as the event
// stream reads them).
type Browse interface {
	// SessionList lists c.Tenant's sessions that hold a log, ordered by
	// tenant then name ("" lists every tenant's). It opens and creates
	// nothing.
	SessionList(ctx context.Context, c Call) ([]SessionInfo, error)
	// History is every record of one promise or claim (family "promise"
	// or "claim") in c's session, in log order, with the record's state
	// after each, up to what is durable; a claim's history also holds the
	// records about other claims that changed its state. A record without
	// one is refused NotFound.
	History(ctx context.Context, c Call, family, id string) ([]HistoryStep, error)
	// Obligations is c's session at c.Now as one table: a row for each
	// promise, claim and expectation q may select, in log order (q's
	// family, by and to narrow which views are made), and the sequence
	// it was read at; with expectations, their lapses by kind.
	Obligations(ctx context.Context, c Call, q ObligationQuery) (ObligationTable, error)
}

// ObligationQuery narrows an obligation table: a family ("" every one),
// a debtor (by) and a creditor (to).
type ObligationQuery struct {
	Family, By, To string
}

// ObligationTable is a session's obligations at Now, read at Seq.
type ObligationTable struct {
	Now    time.Time
	Seq    uint64
	Rows   []Obligation
	Lapses map[string]int // expectations' lapses by kind (when the query takes expectations)
}

// Obligation is one row of the console's table, whatever its family.
type Obligation struct {
	Family string `json:"family"` // promise | claim | expectation
	ID     string `json:"id"`
	Text   string `json:"text"`
	State  string `json:"state"`
	// By is who owes it (debtor, respondent, raiser); To is whom it is
	// owed to (creditor, claimant) or, for an expectation, its subject.
	By string `json:"by"`
	To string `json:"to"`
	// Due is the deadline in force, if any.
	Due *time.Time `json:"due"`
	// Attention says why the row comes first: overdue, lapsed or failed.
	Attention string `json:"attention,omitempty"`
	Seq       uint64 `json:"seq"`
	// Ended says the obligation ended (resolved, terminal, closed), and
	// EndedAt when, where the log says: the Due column then says so
	// rather than counting down.
	Ended   bool       `json:"ended,omitempty"`
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// AnsweredBy is the successor that answered a failed claim or a lapsed,
	// superseded expectation (it was satisfied); Dismissed says a person
	// dismissed the row (a fact with DismissKey). Either takes the row off
	// the attention list; neither is set on a row that needs none.
	AnsweredBy string `json:"answered_by,omitempty"`
	Dismissed  bool   `json:"dismissed,omitempty"`
}

// A person dismisses an item from the attention list by recording a fact
// (POST …/facts, the expectation family's own write): its key is
// DismissKey(family, id), its subject {"type":"attention","id":family+":"+id}.
// So the dismissal is in the log, attributed and replicated like every
// record, and needs no record type of its own.
const dismissPrefix = "attention.dismissed:"

// DismissKey is the fact key that dismisses row family/id from attention.
func DismissKey(family, id string) string { return dismissPrefix + family + ":" + id }

// SessionInfo is one session of a list: its tenant, its name and the size
// of its log.
type SessionInfo struct {
	Tenant  string `json:"-"`
	Session string `json:"session"`
	Bytes   int64  `json:"bytes"`
}

// HistoryStep is one record of a history and the state after it.
type HistoryStep struct {
	Seq    uint64          `json:"seq"`
	Type   string          `json:"type"`
	Actor  string          `json:"actor,omitempty"`
	State  string          `json:"state"`
	Record json.RawMessage `json:"record"`
	// Via is set when the record is about another claim and changed this
	// one's state (a dependency that settled it).
	Via string `json:"via,omitempty"`
}

// Feed is a session's change feed, what a subscribed MCP resource hears.
// ledgerservice.Local implements it over the sessions it opens.
type Feed interface {
	// Changes signals each commit to c's session, and the lines other
	// processes append to its log, until ctx ends or the implementation
	// stops. One pending signal stands for any number, and one is sent
	// once the session is open, since what a reader read may have changed
	// before. A session without a log is waited for.
	Changes(ctx context.Context, c Call) (<-chan struct{}, error)
}
