package client

import (
	"context"

	"tally/api"
	"tally/promise"
	"tally/service"
)

var _ service.Promises = (*Client)(nil)

// DeclarePromise posts d to the session's promises.
func (c *Client) DeclarePromise(ctx context.Context, call service.Call, d api.PromiseDeclare) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, "promises"))
}

// AmendPromise posts d to its promise's amend route.
func (c *Client) AmendPromise(ctx context.Context, call service.Call, d api.PromiseAmend) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, "promises", d.ID, "amend"))
}

// ResolvePromise posts d to its promise's resolve route.
func (c *Client) ResolvePromise(ctx context.Context, call service.Call, d api.PromiseResolve) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, "promises", d.ID, "resolve"))
}

// AssessPromise posts d to its promise's assess route.
func (c *Client) AssessPromise(ctx context.Context, call service.Call, d api.PromiseAssess) (service.PromiseWritten, error) {
	return written(c.post(ctx, call, d, "promises", d.ID, "assess"))
}

func written(doc service.Doc, err error) (service.PromiseWritten, error) {
	if err != nil {
		return service.PromiseWritten{}, err
	}
	return service.ReadPromiseWritten(doc)
}

// Promise reads one promise.
func (c *Client) Promise(ctx context.Context, call service.Call, id string) (service.PromiseShown, error) {
	doc, err := c.get(ctx, call, nil, "promises", id)
	if err != nil {
		return service.PromiseShown{}, err
	}
	return service.ReadPromiseShown(doc)
}

// ListPromises reads the promises f selects.
func (c *Client) ListPromises(ctx context.Context, call service.Call, f promise.Filter) (service.PromiseList, error) {
	q := api.PromiseQueryOf(f)
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), "promises")
	if err != nil {
		return service.PromiseList{}, err
	}
	return service.ReadPromiseList(doc)
}
