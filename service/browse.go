package service

import (
	"context"
	"encoding/json"
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
}

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
