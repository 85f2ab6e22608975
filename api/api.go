// Package api holds the request documents of tally's verbs, each defined
// once: what `tally VERB -` reads on stdin, what a REST route takes as its
// body and what an A2A message carries in its metadata, decoded by one
// strict decoder, with the action table that names each verb in A2A
// metadata; and the writer of the response documents (document*.go: Doc,
// M, S, the promise and token documents, the error document). A document becomes its family's command here; the rules and the
// defaults every binding shares are the family core's decide.
package api

import "time"

// Action is one verb of a family as a document names it: the "action" of
// an A2A record, and the REST route that runs the same verb. Members are the
// members its document may carry; Build decodes a document strictly and
// makes the family's command (C), now reading a relative time.
type Action[C any] struct {
	Name    string
	Members []string
	Build   func(where string, body []byte, now time.Time) (C, error)
}

// Actions are a family's actions, its default (a record that names none)
// first.
type Actions[C any] []Action[C]

// Find returns the action called name.
func (as Actions[C]) Find(name string) (Action[C], bool) {
	for _, a := range as {
		if a.Name == name {
			return a, true
		}
	}
	return Action[C]{}, false
}

// Names lists the actions' names, the default first.
func (as Actions[C]) Names() []string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	return names
}

// verb is an action whose document is D, decoded by Decode, made a command
// by build.
func verb[C, D any](name string, build func(d *D, now time.Time) (C, error)) Action[C] {
	var zero D
	return Action[C]{Name: name, Members: Members(&zero), Build: func(where string, body []byte, now time.Time) (C, error) {
		var d D
		if err := Decode(where, body, &d); err != nil {
			var none C
			return none, err
		}
		return build(&d, now)
	}}
}
