package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/rest"
)

// The operator's routes: a leadership transfer and a node's removal, each
// signed with the join secret (the operator holds it; the routes are not
// behind the API's tokens).
const (
	TransferLeaderPath = "/v1/cluster/transfer-leader"
	AddNodePath        = "/v1/cluster/add-node"
	RemoveNodePath     = "/v1/cluster/remove-node"
)

// AddRequest records a node in the membership before it starts: its id
// and addresses are reserved (a join under another id at them is refused),
// each group's leader adds it as a learner, and the node, started with
// `--join`, is let in as the member recorded.
type AddRequest struct {
	Member replica.Member `json:"member"`
	Signed
}

// TransferRequest asks a group's leader to hand leadership to a voter.
type TransferRequest struct {
	Group uint64 `json:"group"`
	To    uint64 `json:"to"`
	Signed
}

// RemoveRequest removes a node from the membership and from every group.
type RemoveRequest struct {
	ID uint64 `json:"id"`
	Signed
}

func (r *AddRequest) envelope() (string, *Signed, []any) {
	return "add-node", &r.Signed, []any{r.Member}
}

func (r *TransferRequest) envelope() (string, *Signed, []any) {
	return "transfer-leader", &r.Signed, []any{r.Group, r.To}
}

func (r *RemoveRequest) envelope() (string, *Signed, []any) {
	return "remove-node", &r.Signed, []any{r.ID}
}

// OpTransferLeader hands a group's leadership over, at its leader (a
// request that reaches another node is refused naming the leader), and
// waits until the group has the new leader, or answers 504
// TransferPending: raft was asked, and the voter has not taken over yet.
func (c *Node) OpTransferLeader(ctx context.Context, decode Decode) (any, error) {
	var req TransferRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The nonce is spent first: a replay is refused as one wherever
	// leadership has gone since.
	err := c.spendNonce(ctx, &req.Signed)
	if err == nil {
		err = c.transferCheck(ctx, req)
	}
	if err == nil {
		err = c.waitLeader(ctx, req.Group, req.To, c.transferWait())
	}
	if err != nil {
		return nil, refusal(err)
	}
	return map[string]uint64{"group": req.Group, "leader": req.To}, nil
}

// transferCheck refuses a transfer to a node that is not a voter of the
// group, or asked at a node that does not lead it; else it asks raft to
// hand the leadership over.
func (c *Node) transferCheck(ctx context.Context, req TransferRequest) error {
	var refusal error
	notLeader := false
	err := c.do(ctx, func(n *node.MultiRaft) {
		for _, st := range n.Status() {
			if st.Group != req.Group {
				continue
			}
			switch {
			case !slices.Contains(st.Voters, req.To):
				refusal = refuse.Invalidf("to", fmt.Sprintf("node %d is not a voter of group %d", req.To, req.Group))
			case st.Leader != c.cfg.NodeID:
				notLeader = true
			default:
				n.TransferLeader(req.Group, req.To)
			}
			return
		}
		refusal = refuse.NotFoundf("group", fmt.Sprintf("no group %d", req.Group))
	})
	switch {
	case err != nil:
		return err
	case notLeader:
		return c.unavailable(req.Group, fmt.Errorf("%w: transfer leadership at the group's leader", node.ErrNotLeader))
	}
	return refusal
}

// transferWait is how long a transfer is waited for: raft gives up on one
// after an election timeout (10 to 20 ticks).
func (c *Node) transferWait() time.Duration { return max(3*time.Second, 30*c.cfg.Tick) }

// CodeTransferPending answers a transfer that raft was asked for and that
// has not completed within the wait (HTTP 504): it may still complete, or
// have been given up; the group's status says which.
const CodeTransferPending = "TransferPending"

// transferPending is a transfer asked for and not seen completed.
type transferPending struct {
	group, to uint64
	waited    time.Duration
}

func (e transferPending) Error() string {
	return fmt.Sprintf("group %d: node %d was asked to take the leadership and has not within %v: it may not answer; the transfer may still complete or be given up (tally cluster groups shows the leader)", e.group, e.to, e.waited)
}

func (c *Node) waitLeader(ctx context.Context, group, to uint64, bound time.Duration) error {
	end := time.Now().Add(bound)
	for {
		for _, g := range c.lastStatus() {
			if g.Group == group && g.Leader == to {
				return nil
			}
		}
		if !time.Now().Before(end) {
			return transferPending{group: group, to: to, waited: bound}
		}
		select {
		case <-ctx.Done():
			return transferPending{group: group, to: to, waited: bound}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// OpAddNode commits a node's member record in the meta group, once its
// id and addresses are well formed.
func (c *Node) OpAddNode(ctx context.Context, decode Decode) (any, error) {
	var req AddRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	m := req.Member
	if err := CheckMember(m, "member."); err != nil {
		return nil, refusal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.spendNonce(ctx, &req.Signed)
	if err == nil {
		_, err = c.addMember(ctx, m)
	}
	if err != nil {
		return nil, refusal(err)
	}
	return map[string]any{"added": m, "cluster_id": c.id.ClusterID, "members": c.sm.Members()}, nil
}

// CheckMember refuses a member record without an id, or whose addresses
// are not HOST:PORT (a host, a port from 1 to 65535), naming the field
// (prefix names where the record is: "member." in a request).
func CheckMember(m replica.Member, prefix string) error {
	if m.ID == 0 {
		return refuse.Invalidf(prefix+"id", "required, not 0")
	}
	for _, f := range []struct{ field, addr string }{{"raft_addr", m.RaftAddr}, {"addr", m.Addr}} {
		if err := CheckHostPort(f.addr); err != nil {
			return refuse.Invalidf(prefix+f.field, err.Error())
		}
	}
	if m.GossipAddr != "" {
		if err := CheckHostPort(m.GossipAddr); err != nil {
			return refuse.Invalidf(prefix+"gossip_addr", err.Error())
		}
	}
	return nil
}

// CheckHostPort says what is wrong with a node's address: it must be
// HOST:PORT with a host and a port from 1 to 65535.
func CheckHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if host == "" || strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: the host must be a name or an IP address", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	return nil
}

// OpRemoveNode commits a node's removal in the meta group; each group's
// leader then takes it out of the group (refusing a change that would lose
// quorum).
func (c *Node) OpRemoveNode(ctx context.Context, decode Decode) (any, error) {
	var req RemoveRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if _, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpMemberRemove, ID: req.ID}); err != nil {
		return nil, refusal(err)
	}
	return map[string]any{"removed": req.ID, "members": c.sm.Members()}, nil
}

// refusal is err as the API answers it: a signed request's instant
// (403 StaleRequest), a transfer not seen completed (504), a rule's
// refusal by its code (Replayed 403, TooManySigned 429, invalid 400,
// not_found 404, any other 409); the retryable 503s and anything else are
// answered by the server's one mapping (rest.Refuse).
func refusal(err error) error {
	var stale staleRequest
	var pending transferPending
	var ref *rest.Refusal
	var rf rest.Refuser
	switch {
	case errors.As(err, &stale):
		return rest.NewRefusal(http.StatusForbidden, CodeStaleRequest, stale.msg)
	case errors.As(err, &pending):
		return rest.NewRefusal(http.StatusGatewayTimeout, CodeTransferPending, pending.Error())
	case errors.As(err, &ref), errors.As(err, &rf):
		return err
	}
	if r, ok := refuse.As(err); ok {
		status := http.StatusConflict
		switch r.Code {
		case refuse.Invalid:
			status = http.StatusBadRequest
		case refuse.NotFound:
			status = http.StatusNotFound
		case replica.CodeReplayed:
			status = http.StatusForbidden
		case replica.CodeTooManySigned:
			status = http.StatusTooManyRequests
		}
		return rest.NewRefusal(status, string(r.Code), err.Error())
	}
	return err
}
