package client

import (
	"context"

	"tally/api"
	"tally/expect"
	"tally/service"
	"tally/verb"
)

var _ service.Expectations = (*Client)(nil)

// RaiseExpectation posts d, its relative times read at d.RelativeTo, to
// the session's expectations.
func (c *Client) RaiseExpectation(ctx context.Context, call service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
	d, err := d.Absolute()
	if err != nil {
		return service.ExpectationWritten{}, err
	}
	return expectationWritten(c.post(ctx, call, d, verb.ExpectRaise))
}

// SupersedeExpectation posts d to old's supersede route.
func (c *Client) SupersedeExpectation(ctx context.Context, call service.Call, old string, d api.ExpectRaise) (service.ExpectationWritten, error) {
	d, err := d.Absolute()
	if err != nil {
		return service.ExpectationWritten{}, err
	}
	return expectationWritten(c.post(ctx, call, d, verb.ExpectSupersede, old))
}

// WithdrawExpectation posts d to id's withdraw route.
func (c *Client) WithdrawExpectation(ctx context.Context, call service.Call, id string, d api.ExpectWithdraw) (service.ExpectationWritten, error) {
	return expectationWritten(c.post(ctx, call, d, verb.ExpectWithdraw, id))
}

// CommitLapse posts d to the session's lapses.
func (c *Client) CommitLapse(ctx context.Context, call service.Call, d api.ExpectLapse) (service.ExpectationWritten, error) {
	return expectationWritten(c.post(ctx, call, d, verb.ExpectLapse))
}

func expectationWritten(doc service.Doc, err error) (service.ExpectationWritten, error) {
	return answer(service.ReadExpectationWritten, doc, err)
}

// RecordFact posts d to the session's facts.
func (c *Client) RecordFact(ctx context.Context, call service.Call, d api.ExpectFact) (service.FactRecorded, error) {
	doc, err := c.post(ctx, call, d, verb.ExpectFact)
	return answer(service.ReadFactRecorded, doc, err)
}

// RecordTaskOutcome posts d to task's outcome route.
func (c *Client) RecordTaskOutcome(ctx context.Context, call service.Call, task string, d api.ExpectTaskOutcome) (service.TaskOutcomeRecorded, error) {
	doc, err := c.post(ctx, call, d, verb.ExpectTaskOutcome, task)
	return answer(service.ReadTaskOutcomeRecorded, doc, err)
}

// Expectation reads one expectation.
func (c *Client) Expectation(ctx context.Context, call service.Call, id string) (service.ExpectationShown, error) {
	doc, err := c.get(ctx, call, nil, verb.ExpectShow, id)
	return answer(service.ReadExpectationShown, doc, err)
}

// ListExpectations reads the expectations f selects.
func (c *Client) ListExpectations(ctx context.Context, call service.Call, f expect.Filter) (service.ExpectationList, error) {
	q := api.ExpectQueryOf(f)
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), verb.ExpectList)
	return answer(service.ReadExpectationList, doc, err)
}

// Lapses reads the recorded lapses f selects.
func (c *Client) Lapses(ctx context.Context, call service.Call, f service.LapseFilter) (service.LapseList, error) {
	q := f.Query()
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), verb.ExpectLapses)
	return answer(service.ReadLapseList, doc, err)
}

// TaskOrigin reads origin task task.
func (c *Client) TaskOrigin(ctx context.Context, call service.Call, task string) (service.TaskOriginShown, error) {
	doc, err := c.get(ctx, call, nil, verb.ExpectTask, task)
	return answer(service.ReadTaskOriginShown, doc, err)
}
