package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tally/api"
	"tally/promise"
)

// Promises is the promise family: pinki's verbs.
type Promises interface {
	// DeclarePromise declares d as c.Actor; d.By defaults to the actor.
	DeclarePromise(ctx context.Context, c Call, d api.PromiseDeclare) (PromiseWritten, error)
	// AmendPromise moves a deadline; only the debtor may.
	AmendPromise(ctx context.Context, c Call, d api.PromiseAmend) (PromiseWritten, error)
	// ResolvePromise satisfies or cancels (the debtor) or releases (the creditor).
	ResolvePromise(ctx context.Context, c Call, d api.PromiseResolve) (PromiseWritten, error)
	// AssessPromise records the actor's judgment beside the promise.
	AssessPromise(ctx context.Context, c Call, d api.PromiseAssess) (PromiseWritten, error)
	// Promise is one promise at c.Now; a missing one is a NotFound refusal.
	Promise(ctx context.Context, c Call, id string) (PromiseShown, error)
	// ListPromises is the promises f selects at c.Now.
	ListPromises(ctx context.Context, c Call, f promise.Filter) (PromiseList, error)
}

// PromiseWritten is a promise write's outcome: the record's sequence and
// the promise as the write left it.
type PromiseWritten struct {
	Doc
	Seq      uint64
	Promise  promise.View
	Warnings []string
}

// PromiseShown is one promise at Now.
type PromiseShown struct {
	Doc
	Now     time.Time
	Promise promise.View
}

// PromiseList is the promises a filter selected at Now.
type PromiseList struct {
	Doc
	Now      time.Time
	Promises []promise.View
}

// The promise methods' names, what a request id is bound to with the
// document.
const (
	MethodDeclarePromise = "DeclarePromise"
	MethodAmendPromise   = "AmendPromise"
	MethodResolvePromise = "ResolvePromise"
	MethodAssessPromise  = "AssessPromise"
)

// ReadPromiseWritten reads a promise write's response document (a replayed
// one, or a server's answer) into its result.
func ReadPromiseWritten(doc Doc) (PromiseWritten, error) {
	var m struct {
		Seq      uint64          `json:"seq"`
		Promise  json.RawMessage `json:"promise"`
		Warnings []string        `json:"warnings"`
	}
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		return PromiseWritten{}, fmt.Errorf("promise write response: %w", err)
	}
	v, err := api.DecodeView(m.Promise)
	if err != nil {
		return PromiseWritten{}, fmt.Errorf("promise write response: %w", err)
	}
	return PromiseWritten{Doc: doc, Seq: m.Seq, Promise: v, Warnings: m.Warnings}, nil
}

// ReadPromiseShown reads the document of one promise.
func ReadPromiseShown(doc Doc) (PromiseShown, error) {
	var m struct {
		Now     time.Time       `json:"now"`
		Promise json.RawMessage `json:"promise"`
	}
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		return PromiseShown{}, fmt.Errorf("promise response: %w", err)
	}
	v, err := api.DecodeView(m.Promise)
	if err != nil {
		return PromiseShown{}, fmt.Errorf("promise response: %w", err)
	}
	return PromiseShown{Doc: doc, Now: m.Now.UTC(), Promise: v}, nil
}

// ReadPromiseList reads the document of a list of promises.
func ReadPromiseList(doc Doc) (PromiseList, error) {
	var m struct {
		Now      time.Time       `json:"now"`
		Promises json.RawMessage `json:"promises"`
	}
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		return PromiseList{}, fmt.Errorf("promises response: %w", err)
	}
	vs, err := api.DecodeViews(m.Promises)
	if err != nil {
		return PromiseList{}, fmt.Errorf("promises response: %w", err)
	}
	return PromiseList{Doc: doc, Now: m.Now.UTC(), Promises: vs}, nil
}
