package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tally/cluster/replica"
	"tally/ledger"
	"tally/service"
)

// A write is one Service method called on every replica: write proposes
// it and returns this replica's result; method is how a replica runs it.
// Both take the method by its name and its api document D, and the result
// type R the method returns.

// write proposes a command to the session's group and returns what
// applying it here returned: the same value, or the same refusal, as the
// local ledger gives.
func write[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D) (R, error) {
	return commit[D, R](ctx, c, name, call, d, c.propose)
}

// proposer commits an entry's data in a group (Node.propose, or
// Node.proposeAgain).
type proposer func(ctx context.Context, group uint64, data []byte) (replica.Outcome, error)

// commit is write through propose.
func commit[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D, propose proposer) (R, error) {
	var zero R
	doc, err := json.Marshal(d)
	if err != nil {
		return zero, fmt.Errorf("cluster: encode %s document: %w", name, err)
	}
	data, err := c.command(name, call, doc).Encode()
	if err != nil {
		return zero, err
	}
	out, err := propose(ctx, c.sm.GroupOf(call.Tenant, call.Session), data)
	if err != nil {
		return zero, err
	}
	if out.Err != nil {
		return zero, out.Err
	}
	v, ok := out.Value.(R)
	if !ok {
		return zero, fmt.Errorf("cluster: %s returned %T", name, out.Value)
	}
	return v, nil
}

// command is the command of method name with document doc, as call asks
// it, fixed here: the instant and the seed of its ids.
func (c *Node) command(name string, call service.Call, doc []byte) replica.Command {
	return replica.Command{Method: name, Tenant: call.Tenant, Session: call.Session, Actor: call.Actor, Person: call.Person,
		RequestID: call.RequestID, TS: time.Now().UnixNano(), Seed: seed(), Doc: doc}
}

// method is how a replica runs a write: decode its document, call the
// Service.
func method[D, R any](f func(service.Service, context.Context, service.Call, D) (R, error)) replica.Method {
	return func(ctx context.Context, svc service.Service, c service.Call, doc []byte) (any, error) {
		var d D
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("cluster: decode command document: %w", err)
		}
		return f(svc, ctx, c, d)
	}
}

// read waits for the session's group to be read-consistent here, then
// reads this replica. A read's instant is the wall clock unless the call
// names one.
func read[R any](ctx context.Context, c *Node, call service.Call, f func(service.Service, service.Call) (R, error)) (R, error) {
	var zero R
	if err := c.readIndex(ctx, c.sm.GroupOf(call.Tenant, call.Session)); err != nil {
		return zero, err
	}
	if call.Now.IsZero() {
		call.Now = time.Now().UTC()
	}
	return f(c.sm.Service(), call)
}

// methods are the commands a replica runs, by name.
func (c *Node) methods() map[string]replica.Method {
	m := map[string]replica.Method{methodSweep: c.sweepMethod((*ledger.Ledger).Sweep), methodSweepClaims: c.sweepMethod((*ledger.Ledger).SweepClaims)}
	for k, v := range promiseMethods() {
		m[k] = v
	}
	for k, v := range expectMethods() {
		m[k] = v
	}
	for k, v := range logMethods() {
		m[k] = v
	}
	for k, v := range c.claimMethods() {
		m[k] = v
	}
	return m
}
