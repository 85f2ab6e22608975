package cluster

import (
	"context"

	"tally/api"
	"tally/expect"
	"tally/service"
	"tally/verb"
)

var _ service.Expectations = (*Node)(nil)

// RaiseExpectation raises d in the session's group; its relative times
// are read here, at the proposer, so every replica raises the same.
func (c *Node) RaiseExpectation(ctx context.Context, call service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
	d, err := d.Absolute()
	if err != nil {
		return service.ExpectationWritten{}, err
	}
	return write[api.ExpectRaise, service.ExpectationWritten](ctx, c, service.MethodRaiseExpectation, call, d)
}

// SupersedeExpectation extends old with d.
func (c *Node) SupersedeExpectation(ctx context.Context, call service.Call, old string, d api.ExpectRaise) (service.ExpectationWritten, error) {
	d, err := d.Absolute()
	if err != nil {
		return service.ExpectationWritten{}, err
	}
	return write[verb.OnPath[api.ExpectRaise], service.ExpectationWritten](ctx, c, service.MethodSupersedeExpectation, call, verb.OnPath[api.ExpectRaise]{Path: old, Doc: d})
}

// RecordFact records d as observed by call.Actor.
func (c *Node) RecordFact(ctx context.Context, call service.Call, d api.ExpectFact) (service.FactRecorded, error) {
	return write[api.ExpectFact, service.FactRecorded](ctx, c, service.MethodRecordFact, call, d)
}

// WithdrawExpectation withdraws id.
func (c *Node) WithdrawExpectation(ctx context.Context, call service.Call, id string, d api.ExpectWithdraw) (service.ExpectationWritten, error) {
	return write[verb.OnPath[api.ExpectWithdraw], service.ExpectationWritten](ctx, c, service.MethodWithdrawExpectation, call, verb.OnPath[api.ExpectWithdraw]{Path: id, Doc: d})
}

// RecordTaskOutcome records task's outcome.
func (c *Node) RecordTaskOutcome(ctx context.Context, call service.Call, task string, d api.ExpectTaskOutcome) (service.TaskOutcomeRecorded, error) {
	return write[verb.OnPath[api.ExpectTaskOutcome], service.TaskOutcomeRecorded](ctx, c, service.MethodRecordTaskOutcome, call, verb.OnPath[api.ExpectTaskOutcome]{Path: task, Doc: d})
}

// CommitLapse commits a lapse as the timekeeper.
func (c *Node) CommitLapse(ctx context.Context, call service.Call, d api.ExpectLapse) (service.ExpectationWritten, error) {
	return write[api.ExpectLapse, service.ExpectationWritten](ctx, c, service.MethodCommitLapse, call, d)
}

// Expectation is one expectation, read linearizably.
func (c *Node) Expectation(ctx context.Context, call service.Call, id string) (service.ExpectationShown, error) {
	return readOn(ctx, c, call, id, service.Service.Expectation)
}

// ListExpectations is the expectations f selects, read linearizably.
func (c *Node) ListExpectations(ctx context.Context, call service.Call, f expect.Filter) (service.ExpectationList, error) {
	return readOn(ctx, c, call, f, service.Service.ListExpectations)
}

// Lapses is the recorded lapses f selects, read linearizably.
func (c *Node) Lapses(ctx context.Context, call service.Call, f service.LapseFilter) (service.LapseList, error) {
	return readOn(ctx, c, call, f, service.Service.Lapses)
}

// TaskOrigin is origin task task, read linearizably.
func (c *Node) TaskOrigin(ctx context.Context, call service.Call, task string) (service.TaskOriginShown, error) {
	return readOn(ctx, c, call, task, service.Service.TaskOrigin)
}
