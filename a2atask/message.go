package a2atask

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/expect"
	"tally/instant"
)

// ExpectReply is the answer to an expect record (expectations are not
// tasks of this agent): a message id in the request's context, referencing
// its task (if any), under the record's extension uri with the resulting
// document under the record's key, saying "<action> recorded".
func ExpectReply(id, contextID string, task a2a.TaskID, uri, key, action string, doc []byte) *a2a.Message {
	m := &a2a.Message{
		ID: id, Role: a2a.MessageRoleAgent, ContextID: contextID,
		Extensions: []string{uri}, Metadata: map[string]any{key: json.RawMessage(doc)},
		Parts: a2a.ContentParts{a2a.NewTextPart(action + " recorded")},
	}
	if task != "" {
		m.ReferenceTasks = []a2a.TaskID{task}
	}
	return m
}

// LapsedExpectation is what a lapse message says of its expectation.
type LapsedExpectation struct {
	Kind    string
	Subject expect.Subject
	Origin  *expect.Origin
}

// LapseMessage is the message a lapse goes back to its raising agent as: a
// new message (so a new task on the agent's side), its id the lapse id, in
// the origin's context, referencing the origin task, under the extension
// uri with the lapse notice doc in metadata[uri] and a line of text saying
// what lapsed. e is nil when the expectation is not known.
func LapseMessage(lv *expect.LapseView, e *LapsedExpectation, doc []byte, uri string) *a2a.Message {
	text := fmt.Sprintf("expectation %s lapsed: %s (due %s, lapsed at %s)",
		lv.ExpectationID, lv.Lapse, instant.Format(lv.DueAt), instant.Format(lv.LapsedAt))
	msg := &a2a.Message{
		ID:         lv.LapseID,
		Role:       a2a.MessageRoleUser,
		Extensions: []string{uri},
		Metadata:   map[string]any{uri: json.RawMessage(doc)},
	}
	if e != nil {
		text = fmt.Sprintf("expectation %s (%s on %s) lapsed: %s (due %s, lapsed at %s)",
			lv.ExpectationID, e.Kind, e.Subject, lv.Lapse, instant.Format(lv.DueAt), instant.Format(lv.LapsedAt))
		if o := e.Origin; o != nil {
			msg.ContextID = o.ContextID
			if o.TaskID != "" {
				msg.ReferenceTasks = []a2a.TaskID{a2a.TaskID(o.TaskID)}
			}
		}
	}
	msg.Parts = a2a.ContentParts{a2a.NewTextPart(text)}
	return msg
}
