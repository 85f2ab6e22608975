package expect

import (
	"time"

	"tally/family"
)

// Family is the expectation family behind the interface every family shares
// (family.Interface), over one state. It is a value the ledger makes when it
// decides: it holds no state of its own.
type Family struct {
	S *State
}

var (
	_ family.Interface[Command, Event, View] = Family{}
	_ family.Folder                          = (*State)(nil)
)

// Known reports whether typ is an expectation record type.
func (f Family) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes an expectation line and folds it (State.ApplyLine).
func (f Family) ApplyLine(m family.Meta, line []byte) error { return f.S.ApplyLine(m, line) }

// Decide decides cmd as in.Actor at in.Now (in.Human: a person, who may
// extend past the lineage bound): the events of one atomic batch.
func (f Family) Decide(in family.Input, cmd Command) ([]Event, []string, error) {
	evs, err := f.S.Decide(in.Actor, in.Human, in.Now, cmd)
	return evs, nil, err
}

// Apply folds an event appended at m, at the event's own time.
func (f Family) Apply(m family.Meta, e Event) { f.S.Apply(metaOf(m, e), e) }

// Encode returns the record e is written as. An expectation record names no party
// of its own: the log always records the actor.
func (f Family) Encode(e Event) family.Record { return family.Record{Type: e.Type, Body: e.Encode()} }

// View returns the view of expectation id. An expectation's view does not
// depend on now: its lapses are committed facts.
func (f Family) View(id string, _ time.Time) (View, bool) {
	return f.S.Expectation(id)
}

// Known reports whether typ is an expectation record type (family.Folder).
func (s *State) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes one verified log line of an expectation type and folds it
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
