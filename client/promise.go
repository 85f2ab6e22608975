package client

import (
	"context"

	"tally/api"
	"tally/promise"
	"tally/service"
	"tally/verb"
)

var _ service.Promises = (*Client)(nil)

// DeclarePromise posts d as promise.declare.
func (c *Client) DeclarePromise(ctx context.Context, call service.Call, d api.PromiseDeclare) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, verb.PromiseDeclare))
}

// AmendPromise posts d as promise.amend.
func (c *Client) AmendPromise(ctx context.Context, call service.Call, d api.PromiseAmend) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, verb.PromiseAmend, d.ID))
}

// ResolvePromise posts d as promise.resolve.
func (c *Client) ResolvePromise(ctx context.Context, call service.Call, d api.PromiseResolve) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, verb.PromiseResolve, d.ID))
}

// AssessPromise posts d as promise.assess.
func (c *Client) AssessPromise(ctx context.Context, call service.Call, d api.PromiseAssess) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, verb.PromiseAssess, d.ID))
}

func written(doc service.Doc, err error) (service.PromiseWritten, error) {
	return answer(service.ReadPromiseWritten, doc, err)
}

// Promise reads one promise.
func (c *Client) Promise(ctx context.Context, call service.Call, id string) (service.PromiseShown, error) {
	doc, err := c.get(ctx, call, nil, verb.PromiseShow, id)
	return answer(service.ReadPromiseShown, doc, err)
}

// ListPromises reads the promises f selects.
func (c *Client) ListPromises(ctx context.Context, call service.Call, f promise.Filter) (service.PromiseList, error) {
	q := api.PromiseQueryOf(f)
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), verb.PromiseList)
	return answer(service.ReadPromiseList, doc, err)
}
