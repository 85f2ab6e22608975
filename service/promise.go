package service

import (
	"context"
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
