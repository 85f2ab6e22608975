package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"tally/cluster/replica"
	"tally/service"
	"tally/verb"
)

// A write is one Service method called on every replica: write proposes
// it and returns this replica's result; method is how a replica runs it.
// Both take the method by its name and its api document D, and the result
// type R the method returns.

// write proposes a command to the session's group (route.go) and returns
// what applying it here returned: the same value, or the same refusal, as
// the local ledger gives.
func write[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D) (R, error) {
	return commit[D, R](ctx, c, name, call, d, c.propose)
}

// proposer commits an entry's data in a group (Node.propose, or
// Node.proposeAgain).
type proposer func(ctx context.Context, group uint64, data []byte) (replica.Outcome, error)

// commit is write through propose.
func commit[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D, propose proposer) (R, error) {
	var zero R
	cmd, err := NewCommand(name, call, d, time.Now(), seed())
	if err != nil {
		return zero, err
	}
	data, err := cmd.Encode()
	if err != nil {
		return zero, err
	}
	out, _, err := c.routed(ctx, call.Tenant, call.Session, func(g uint64) (replica.Outcome, error) { return propose(ctx, g, data) })
	if err != nil {
		var u *Unavailable
		if errors.As(err, &u) && u.OutcomeUnknown {
			u.RequestID = call.RequestID // what a retry must carry
		}
		return zero, err
	}
	return valueOf[R](name, out)
}

// valueOf is what a command (what) did: its value, of type R, or its
// refusal.
func valueOf[R any](what string, out replica.Outcome) (R, error) {
	var zero R
	if out.Err != nil {
		return zero, out.Err
	}
	v, ok := out.Value.(R)
	if !ok {
		return zero, fmt.Errorf("cluster: %s returned %T", what, out.Value)
	}
	return v, nil
}

// NewCommand is the command a node proposes for a write: the Service
// method by name, its api document, who calls it where (call's tenant,
// session, actor, person and request id), and what the proposer fixes for
// every replica: the instant the records are stamped with and the seed of
// the ids it mints.
func NewCommand(method string, call service.Call, doc any, at time.Time, seed uint64) (replica.Command, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return replica.Command{}, fmt.Errorf("cluster: encode %s document: %w", method, err)
	}
	return replica.Command{Method: method, Tenant: call.Tenant, Session: call.Session, Actor: call.Actor, Person: call.Person,
		RequestID: call.RequestID, TS: at.UnixNano(), Seed: seed, Doc: b}, nil
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
// reads this replica; a stale read (call.Stale) reads it as applied, so a
// node cut off from the group's quorum still answers, maybe behind. A
// read's instant is the wall clock unless the call names one.
func read[R any](ctx context.Context, c *Node, call service.Call, f func(service.Service, service.Call) (R, error)) (R, error) {
	var zero R
	if !call.Stale {
		if err := c.readConsistent(ctx, call.Tenant, call.Session); err != nil {
			return zero, err
		}
	}
	if call.Now.IsZero() {
		call.Now = time.Now().UTC()
	}
	return f(c.sm.Service(), call)
}

// readOn is read of the Service method m with its argument a, as the
// replica answers it.
func readOn[A, R any](ctx context.Context, c *Node, call service.Call, a A, m func(service.Service, context.Context, service.Call, A) (R, error)) (R, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (R, error) { return m(s, ctx, call, a) })
}

// Methods are the commands a replica runs, by name: every write of the
// verb table (its Command, run by its Apply, or here with its staged bytes)
// and the timekeeper's sweeps
// (replica.Config.Methods): every node's, and the simulator's. sm is the
// replica, through which the timekeeper's sweep opens its session and a
// write with bytes opens its upload; it is called only as a command runs,
// so it may return a replica made after the table.
func Methods(sm func() *replica.SM) map[string]replica.Method {
	m := map[string]replica.Method{
		MethodSweep:       sweepMethod(service.SweepExpectations),
		MethodSweepClaims: sweepMethod(service.SweepClaims),
	}
	staged := bytesMethods(sm)
	for _, v := range verb.Table() {
		switch {
		case v.Command == "":
		case v.Apply != nil:
			m[v.Command] = v.Apply
		case staged[v.Command] != nil:
			m[v.Command] = staged[v.Command]
		default:
			panic("cluster: verb " + v.Name + " names command " + v.Command + ", which no replica runs")
		}
	}
	return m
}
