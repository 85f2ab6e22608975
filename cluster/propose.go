package cluster

// Through the node's loop: proposals and read indexes, and the refusal
// of a node that cannot serve one now.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tally/api"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/rest"
	"tally/service"
)

// do runs f on the node's loop and waits for it to have run. Never call it
// from the loop (from f, or a callback): it would wait for itself. An
// error that is a notRun means f was never handed to the loop; any
// other, that it may still run.
func (c *Node) do(ctx context.Context, f func(*node.MultiRaft)) error {
	ran := make(chan struct{})
	select {
	case c.calls <- func(n *node.MultiRaft) { f(n); close(ran) }:
	case <-ctx.Done():
		return notRun{ctx.Err()}
	case <-c.ctx.Done():
		return notRun{ErrStopped}
	}
	select {
	case <-ran:
		return nil
	case <-ctx.Done():
		return ctx.Err() // f may still run
	case <-c.ctx.Done():
		return ErrStopped
	}
}

// notRun is do's error when f was never handed to the loop: its cause.
type notRun struct{ err error }

func (e notRun) Error() string { return e.err.Error() }
func (e notRun) Unwrap() error { return e.err }

// ErrStopped: the node is shutting down. Where nothing was proposed yet it
// is answered as a retryable 503 Unavailable (another node can take it).
var ErrStopped error = stopped{}

type stopped struct{}

func (stopped) Error() string { return "cluster: node stopped" }

func (e stopped) Refusal() *rest.Refusal { return rest.NewRetryable(CodeUnavailable, e.Error()) }

// propose commits data in a group and returns what applying it did here.
// A failure once the loop has it (the proposal handed to raft, a timeout
// while it waited, the node stopping) leaves its outcome unknown: the
// Unavailable says so (OutcomeUnknown), for the caller to name the write's
// request id (commit).
func (c *Node) propose(ctx context.Context, group uint64, data []byte) (replica.Outcome, error) {
	type res struct {
		r node.ProposeResult
		o replica.Outcome
	}
	if err := c.placedHere(group); err != nil {
		return replica.Outcome{}, c.unavailable(group, err)
	}
	ch := make(chan res, 1)
	start := time.Now()
	err := c.do(ctx, func(n *node.MultiRaft) {
		n.Propose(group, data, func(r node.ProposeResult) {
			var o replica.Outcome
			if r.Err == nil {
				o, _ = c.sm.Take(group, r.Index)
			}
			ch <- res{r, o}
		})
	})
	var nr notRun
	if errors.As(err, &nr) {
		// Never handed to the loop: nothing of it can commit.
		return replica.Outcome{}, c.unavailable(group, nr.err)
	}
	if err != nil {
		// The loop may still run it.
		return replica.Outcome{}, c.proposalFailed(group, err, true)
	}
	select {
	case r := <-ch:
		if r.r.Err != nil {
			return replica.Outcome{}, c.proposalFailed(group, r.r.Err, r.r.Proposed)
		}
		c.metrics.proposal.WithLabelValues(groupLabel(group)).Observe(time.Since(start).Seconds())
		return r.o, nil
	case <-ctx.Done():
		return replica.Outcome{}, c.proposalFailed(group, fmt.Errorf("waiting for the group: %w", ctx.Err()), true)
	case <-c.ctx.Done():
		return replica.Outcome{}, c.proposalFailed(group, ErrStopped, true)
	}
}

// readIndex waits until this replica has applied everything the group's
// leader had committed when the read began, confirmed by a quorum.
func (c *Node) readIndex(ctx context.Context, group uint64) error {
	if err := c.placedHere(group); err != nil {
		return c.unavailable(group, err)
	}
	ch := make(chan node.ReadResult, 1)
	start := time.Now()
	if err := c.do(ctx, func(n *node.MultiRaft) { n.ReadIndex(group, func(r node.ReadResult) { ch <- r }) }); err != nil {
		return c.unavailable(group, err) // a read: nothing to commit
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return c.unavailable(group, r.Err)
		}
		c.metrics.readIndex.WithLabelValues(groupLabel(group)).Observe(time.Since(start).Seconds())
		return nil
	case <-ctx.Done():
		return c.unavailable(group, fmt.Errorf("waiting for the group: %w", ctx.Err()))
	case <-c.ctx.Done():
		return c.unavailable(group, ErrStopped)
	}
}

// Unavailable is a retryable refusal: the group cannot take the request at
// this node now (no leader known, a timeout, this node not a member). It
// names the group's leader when this node knows one, so a client can go
// there. With OutcomeUnknown the write was proposed before it failed (the
// leader changed while it waited, a timeout, the node stopping): it may
// have committed, and it is answered as such (CodeUnknownOutcome), naming
// its request id for the retry when it has one.
type Unavailable struct {
	Group      uint64
	Leader     uint64
	LeaderAddr string
	Err        error
	// OutcomeUnknown: the command was handed on before Err; it may still
	// commit.
	OutcomeUnknown bool
	// RequestID is the write's request id (commit sets it), named in the
	// advice to retry.
	RequestID string
}

func (e *Unavailable) Error() string {
	s := fmt.Sprintf("group %d unavailable at this node: %v", e.Group, e.Err)
	if e.OutcomeUnknown {
		s = fmt.Sprintf("group %d did not answer the write at this node: %v", e.Group, e.Err)
	}
	if e.LeaderAddr != "" {
		s += fmt.Sprintf("; its leader is node %d at %s", e.Leader, e.LeaderAddr)
	}
	if e.OutcomeUnknown {
		s += "; " + service.RetryAdvice(e.RequestID)
	}
	return s
}

func (e *Unavailable) Unwrap() error { return e.Err }

// unavailable is the refusal of a request of group that failed with err
// before anything of it was proposed.
func (c *Node) unavailable(group uint64, err error) error { return c.proposalFailed(group, err, false) }

// proposalFailed is the refusal of a proposal or read of group that failed
// with err: proposed, when it may still commit.
func (c *Node) proposalFailed(group uint64, err error, proposed bool) error {
	if errors.Is(err, node.ErrTooLarge) {
		// Not retryable: the same command is too large anywhere.
		return rest.NewRefusal(http.StatusRequestEntityTooLarge, "invalid", "command: "+err.Error())
	}
	u := &Unavailable{Group: group, Err: err, OutcomeUnknown: proposed}
	for _, g := range c.lastStatus() {
		if g.Group == group && g.Leader != 0 {
			u.Leader = g.Leader
		}
	}
	if rec, ok := c.sm.Policy().Groups[group]; ok && rec.Leader != c.cfg.NodeID && (u.Leader == 0 || errors.Is(err, node.ErrNotMember)) {
		// This node does not hold the group (placed elsewhere): it names
		// the leader that last recorded the group's configuration, which
		// a client goes to.
		u.Leader = rec.Leader
	}
	if m, ok := c.sm.Member(u.Leader); ok && u.Leader != 0 {
		u.LeaderAddr = m.Addr
	}
	return u
}

// lastStatus is the groups' status from the loop, or nothing if the loop
// does not answer at once.
func (c *Node) lastStatus() []node.GroupStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var st []node.GroupStatus
	_ = c.do(ctx, func(n *node.MultiRaft) { st = n.Status() })
	return st
}

// CodeUnavailable is the refusal code of a request a node cannot serve now
// (HTTP 503): retry, here or at the leader the document names.
const CodeUnavailable = service.CodeUnavailable

// Refusal is the retryable answer every binding gives (rest.Refuser):
// 503 with Retry-After, the code Unavailable (nothing was proposed) or
// UnknownOutcome (it may have committed), with the group's leader, when
// known, as "leader" (its node id) and "leader_addr" (its HTTP address),
// and the request id a retry must carry as "request_id".
func (e *Unavailable) Refusal() *rest.Refusal {
	code := CodeUnavailable
	if e.OutcomeUnknown {
		code = service.CodeUnknownOutcome
	}
	ms := []api.Member{api.M("group", api.U(e.Group))}
	if e.Leader != 0 {
		ms = append(ms, api.M("leader", api.U(e.Leader)))
	}
	if e.LeaderAddr != "" {
		ms = append(ms, api.M("leader_addr", api.S(e.LeaderAddr)))
	}
	if e.OutcomeUnknown && e.RequestID != "" {
		ms = append(ms, api.M("request_id", api.S(e.RequestID)))
	}
	return rest.NewRetryable(code, e.Error(), ms...)
}
