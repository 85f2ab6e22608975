// Package service is tally's one seam: every verb of the three families and
// of the log, as a typed method. The CLI, the REST and A2A bindings, MCP and
// the cluster call a Service; ledgerservice.Local runs it on this machine's
// ledger directory, the client package runs it through a server's REST API,
// and a cluster node is a third implementation.
//
// A method takes the caller's Call and an api document (the same document
// REST reads as a body and the CLI reads on stdin) and returns a typed result
// carrying the response document byte for byte: what REST answers and what
// --json prints. A refusal is an error the bindings map the same way: a
// rule error (field, rule, code), an IdempotencyError, or, from the
// client, a *rest.Refusal holding the server's error document.
package service

import (
	"time"
)

// Call is who asks, in which session, and under which request id.
type Call struct {
	Tenant, Session string
	// Actor is the acting identity. Local trusts it (the binding has
	// authenticated it); the client sends it only to a server run with
	// --insecure-dev and otherwise acts as its token's identity.
	Actor string
	// Person says the actor is a person (the expectation family's
	// lineage bound), as a person-role token does.
	Person bool
	// RequestID makes a write idempotent: a retry with the same id and
	// the same document returns the recorded response and appends nothing.
	RequestID string
	// Now is the instant a read's views are computed at; zero means the
	// service's clock.
	Now time.Time
	// Stale lets a read be served from what this node's replica has
	// applied, without confirming it with the group's leader: faster, and
	// served by a node cut off from its quorum, but it may miss writes
	// acknowledged elsewhere. Only a cluster node reads otherwise; every
	// other Service's reads are current whatever it says.
	Stale bool
	// ViewsOnly says the caller prints a read's views itself and never
	// reads its Doc.JSON: a Service may leave the document out (a list
	// of 10,000 promises is megabytes to encode for nothing). A Service
	// that gets its views from the document ignores it.
	ViewsOnly bool
	// NoAnswer says the caller of a write uses only whether it was
	// accepted or refused, never its answer (a cluster replica applying a
	// command another node proposed and answers): a Service may leave the
	// answer's document and views out. A write with a request id still
	// records its answer, which a retry gets back.
	NoAnswer bool
}

// Consistency names a read's consistency in the API (the consistency query
// parameter, the Tally-Consistency response header).
const (
	Linearizable = "linearizable"
	Stale        = "stale"
	// ConsistencyHeader marks a read's answer with the consistency it was
	// served at.
	ConsistencyHeader = "Tally-Consistency"
)

// Doc is a response document, byte for byte, and whether it was replayed
// from a request id's record rather than executed.
type Doc struct {
	JSON     []byte
	Replayed bool
}

// Document is the Doc itself: every result embeds a Doc, so each has it,
// and a binding reads any result's document through it.
func (d Doc) Document() Doc { return d }

// Service is every verb tally has. Each family's methods are declared in
// its own file.
type Service interface {
	Promises
	Claims
	Expectations
	Logs
	Work
}

// RequestIDMax bounds a request id (the CLI's --request-id, the REST
// Idempotency-Key).
const RequestIDMax = 256
