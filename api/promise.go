package api

import (
	"time"

	"tally/promise"
)

// The promise family's documents: what `tally promise` reads on stdin, the
// bodies of the promise routes (the path names the promise, so their id is
// the path's) and an A2A promise record (pinki's shape, with "action").
// Meta is a JSON object of the caller's own, kept as given.

// PromiseDeclare is the document of a declaration. Until is RFC 3339 or a
// duration from now; by defaults to the acting identity (in the promise
// core).
type PromiseDeclare struct {
	ID      string `json:"id,omitempty"`
	Promise string `json:"promise"`
	By      string `json:"by,omitempty"`
	To      string `json:"to"`
	On      string `json:"on,omitempty"`
	Until   string `json:"until"`
	Task    string `json:"task,omitempty"`
	Meta    Object `json:"meta,omitempty"`
}

// Command is the declaration; a relative deadline counts from now.
func (d *PromiseDeclare) Command(now time.Time) (promise.Declare, error) {
	until, err := promise.ParseDeadline("until", d.Until, now)
	if err != nil {
		return promise.Declare{}, err
	}
	return promise.Declare{ID: d.ID, Text: d.Promise, By: d.By, To: d.To, On: d.On, Task: d.Task, Until: until, Meta: string(d.Meta)}, nil
}

// PromiseAmend is the document of an amendment: the new deadline.
type PromiseAmend struct {
	ID     string `json:"id,omitempty"`
	Until  string `json:"until"`
	Reason string `json:"reason,omitempty"`
	Meta   Object `json:"meta,omitempty"`
}

func (d *PromiseAmend) Command(now time.Time) (promise.Command, error) {
	until, err := promise.ParseDeadline("until", d.Until, now)
	if err != nil {
		return nil, err
	}
	return promise.Amend{ID: d.ID, Until: until, Reason: d.Reason, Meta: string(d.Meta)}, nil
}

// PromiseResolve is the document of a resolution: satisfied (with
// evidence), cancelled (with a reason) or released.
type PromiseResolve struct {
	ID       string   `json:"id,omitempty"`
	As       string   `json:"as"`
	Evidence []string `json:"evidence,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Meta     Object   `json:"meta,omitempty"`
}

func (d *PromiseResolve) Command() promise.Command {
	return promise.Resolve{ID: d.ID, As: d.As, Evidence: d.Evidence, Reason: d.Reason, Meta: string(d.Meta)}
}

// PromiseAssess is the document of an assessment; state defaults to
// violated and observer to the acting identity (in the promise core).
type PromiseAssess struct {
	ID       string `json:"id,omitempty"`
	State    string `json:"state,omitempty"`
	Observer string `json:"observer,omitempty"`
	Note     string `json:"note,omitempty"`
	Meta     Object `json:"meta,omitempty"`
}

func (d *PromiseAssess) Command() promise.Command {
	return promise.Assess{ID: d.ID, State: d.State, Observer: d.Observer, Note: d.Note, Meta: string(d.Meta)}
}
