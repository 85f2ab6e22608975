// Package family holds the shape every record family's pure core has
// (Interface) and what the log hands it: a record's Meta, a decision's
// Input, the Record it produces, the Folder the fold dispatches to, and a
// line's DecodeError. The cores (promise, claim, expect) implement it and
// the ledger drives them through it.
package family

import "time"

// Meta is what the log knows about a record beyond its body.
type Meta struct {
	Seq uint64
	// Actor is the envelope's actor: the authenticated identity that
	// appended the record when it differs from the record's own party
	// ("" when the log did not record one).
	Actor string
}

// Input is what a decision knows besides the state and the command.
type Input struct {
	Actor string    // the authenticated identity the command runs as
	Human bool      // the actor is a person (some rules admit only people)
	Now   time.Time // the instant the records are stamped with
}

// Record is one record a decision produced, encoded for the log.
type Record struct {
	Type string
	Body []byte // one JSON object, no newline
	// Party is the record's own party field: the log records the actor
	// in the envelope only when it differs ("" when the record names none).
	Party string
}

// Folder is the part of a family the fold dispatches to: a family's state
// implements it, so one loop folds every family's lines.
type Folder interface {
	// Known reports whether typ is one of the family's record types.
	Known(typ string) bool
	// ApplyLine decodes one verified log line of a Known type and folds it.
	// On error (the decoder's, naming the field) nothing is folded; the
	// caller decides whether the line is damage or a newer shape to keep.
	ApplyLine(m Meta, line []byte) error
}

// Interface is one record family's pure semantics, with the same shape for
// every family: C its commands, E its events, V its view of one
// record. Every method is pure: no I/O, no clock (now is an argument).
type Interface[C, E, V any] interface {
	Folder
	// Decide decides cmd against the state: the events to append, in
	// order, and warnings; or a refusal naming the field and the rule.
	// It changes nothing: the events are folded only once they are
	// appended (Apply).
	Decide(in Input, cmd C) ([]E, []string, error)
	// Apply folds one event that was appended at m.
	Apply(m Meta, e E)
	// Encode returns the record an event is written as.
	Encode(e E) Record
	// View returns the view of record id at now, and whether it exists.
	View(id string, now time.Time) (V, bool)
}
