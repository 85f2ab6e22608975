package promise

import (
	"time"

	"tally/family"
)

// Family is the promise family behind the interface every family shares
// (family.Interface), over one state and the limits its declarations are held
// to. It is a value the ledger makes when it decides: it holds no state
// of its own. The writer's fast path (PrepareDeclare outside the session
// lock, Admit under it) stays beside it: it decides the same way.
type Family struct {
	S      *State
	Limits Limits
}

var (
	_ family.Interface[Command, Event, View] = Family{}
	_ family.Folder                          = (*State)(nil)
)

// Known reports whether typ is a promise record type.
func (f Family) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes a promise line and folds it (State.ApplyLine).
func (f Family) ApplyLine(m family.Meta, line []byte) error { return f.S.ApplyLine(m, line) }

// Decide decides cmd as in.Actor at in.Now: one event. Ids are minted by
// the caller (the ledger, under its lock), never here.
func (f Family) Decide(in family.Input, cmd Command) ([]Event, []string, error) {
	ev, warn, err := f.S.Decide(f.Limits, in.Actor, in.Now, cmd)
	if err != nil {
		return nil, nil, err
	}
	if ev.Type == "" {
		return nil, warn, nil // already recorded: an identical assessment
	}
	return []Event{ev}, warn, nil
}

// Apply folds an event appended at m.
func (f Family) Apply(m family.Meta, e Event) {
	f.S.Apply(Meta{Seq: m.Seq, Actor: m.Actor}, &e)
}

// Encode returns the record e is written as; its party is the debtor (the
// observer of an assessment).
func (f Family) Encode(e Event) family.Record {
	return family.Record{Type: e.Type, Body: e.Encode(), Party: e.Party()}
}

// View returns the view of promise id at now.
func (f Family) View(id string, now time.Time) (View, bool) {
	p, ok := f.S.Get(id)
	if !ok {
		return View{}, false
	}
	return f.S.View(p, now), true
}

// Known reports whether typ is a promise record type (family.Folder).
func (s *State) Known(typ string) bool { return Known(typ) }

// ApplyLine decodes one verified log line of a promise type and folds it
// (family.Folder); on a decoding error nothing is folded.
func (s *State) ApplyLine(m family.Meta, line []byte) error {
	ev, err := decode(line, s.names)
	if err != nil {
		return err
	}
	s.Apply(Meta{Seq: m.Seq, Actor: m.Actor}, &ev)
	return nil
}
