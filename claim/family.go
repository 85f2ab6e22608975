package claim

import (
	"time"

	"tally/family"
)

// Family is the claim family behind the interface every family shares
// (family.Interface), over one state. It is a value the ledger makes when it
// decides: it holds no state of its own.
type Family struct {
	S *State
}

var (
	_ family.Interface[Command, Event, View] = Family{}
	_ family.Folder                          = (*State)(nil)
)

// Known reports whether typ is a claim record type.
func (f Family) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes a claim line and folds it (State.ApplyLine).
func (f Family) ApplyLine(m family.Meta, line []byte) error { return f.S.ApplyLine(m, line) }

// Decide decides cmd as in.Actor at in.Now: the events of one atomic batch.
func (f Family) Decide(in family.Input, cmd Command) ([]Event, []string, error) {
	evs, err := f.S.Decide(in.Actor, in.Now, cmd)
	return evs, nil, err
}

// Apply folds an event appended at m, at the event's own time.
func (f Family) Apply(m family.Meta, e Event) { f.S.Apply(metaOf(m, e), e) }

// Encode returns the record e is written as. A claim record names no party
// of its own: the log always records the actor.
func (f Family) Encode(e Event) family.Record { return family.Record{Type: e.Type, Body: e.Encode()} }

// View returns the view of claim id at now.
func (f Family) View(id string, now time.Time) (View, bool) {
	return f.S.Claim(id, now)
}

// Known reports whether typ is a claim record type (family.Folder).
func (s *State) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes one verified log line of a claim type and folds it
// (family.Folder); on a decoding error nothing is folded.
func (s *State) ApplyLine(m family.Meta, line []byte) error {
	ev, err := Decode(line)
	if err != nil {
		return err
	}
	s.Apply(metaOf(m, ev), ev)
	return nil
}

func metaOf(m family.Meta, e Event) Meta {
	return Meta{Seq: m.Seq, Actor: m.Actor, TS: e.TS}
}
