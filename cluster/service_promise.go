package cluster

import (
	"context"

	"tally/api"
	"tally/promise"
	"tally/service"
)

var _ service.Promises = (*Node)(nil)

// DeclarePromise declares d as c.Actor in the session's group.
func (c *Node) DeclarePromise(ctx context.Context, call service.Call, d api.PromiseDeclare) (service.PromiseWritten, error) {
	return write[api.PromiseDeclare, service.PromiseWritten](ctx, c, service.MethodDeclarePromise, call, d)
}

// AmendPromise moves a deadline.
func (c *Node) AmendPromise(ctx context.Context, call service.Call, d api.PromiseAmend) (service.PromiseWritten, error) {
	return write[api.PromiseAmend, service.PromiseWritten](ctx, c, service.MethodAmendPromise, call, d)
}

// ResolvePromise satisfies, cancels or releases.
func (c *Node) ResolvePromise(ctx context.Context, call service.Call, d api.PromiseResolve) (service.PromiseWritten, error) {
	return write[api.PromiseResolve, service.PromiseWritten](ctx, c, service.MethodResolvePromise, call, d)
}

// AssessPromise records a judgment.
func (c *Node) AssessPromise(ctx context.Context, call service.Call, d api.PromiseAssess) (service.PromiseWritten, error) {
	return write[api.PromiseAssess, service.PromiseWritten](ctx, c, service.MethodAssessPromise, call, d)
}

// Promise is one promise, read linearizably.
func (c *Node) Promise(ctx context.Context, call service.Call, id string) (service.PromiseShown, error) {
	return readOn(ctx, c, call, id, service.Service.Promise)
}

// ListPromises is the promises f selects, read linearizably.
func (c *Node) ListPromises(ctx context.Context, call service.Call, f promise.Filter) (service.PromiseList, error) {
	return readOn(ctx, c, call, f, service.Service.ListPromises)
}
