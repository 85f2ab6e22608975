package cluster

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/vocab"
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
	At     string         `json:"at"` // when it was signed (RFC 3339)
	MAC    string         `json:"mac"`
}

// SignAdd signs an add-node request with the join secret, now.
func SignAdd(secret string, r AddRequest) AddRequest {
	r.At = signedNow()
	r.MAC = r.signature(secret)
	return r
}

func (r *AddRequest) signature(secret string) string {
	return mac(secret, "add-node", r.Member, r.At)
}
func (r *AddRequest) signed() (string, string, string) { return "add-node", r.At, r.MAC }

// TransferRequest asks a group's leader to hand leadership to a voter.
type TransferRequest struct {
	Group uint64 `json:"group"`
	To    uint64 `json:"to"`
	At    string `json:"at"`
	MAC   string `json:"mac"`
}

// RemoveRequest removes a node from the membership and from every group.
type RemoveRequest struct {
	ID  uint64 `json:"id"`
	At  string `json:"at"`
	MAC string `json:"mac"`
}

// SignTransfer and SignRemove sign an operator's request with the join
// secret, now.
func SignTransfer(secret string, r TransferRequest) TransferRequest {
	r.At = signedNow()
	r.MAC = r.signature(secret)
	return r
}

func SignRemove(secret string, r RemoveRequest) RemoveRequest {
	r.At = signedNow()
	r.MAC = r.signature(secret)
	return r
}

func (r *TransferRequest) signature(secret string) string {
	return mac(secret, "transfer-leader", r.Group, r.To, r.At)
}
func (r *TransferRequest) signed() (string, string, string) { return "transfer-leader", r.At, r.MAC }

func (r *RemoveRequest) signature(secret string) string {
	return mac(secret, "remove-node", r.ID, r.At)
}
func (r *RemoveRequest) signed() (string, string, string) { return "remove-node", r.At, r.MAC }

// signedRequest is an operator's request: what it is for, when it was
// signed and its MAC, and the MAC the join secret gives its contents.
type signedRequest interface {
	signed() (what, at, mac string)
	signature(secret string) string
}

// SignatureMax is how far from a node's clock an operator's request may
// have been signed: a request seen on the wire cannot be played again
// later (a node removed again once re-added, a backup taken again).
const SignatureMax = 5 * time.Minute

// CodeStaleRequest refuses a signed request whose instant is too far from
// the node's clock.
const CodeStaleRequest = "StaleRequest"

func signedNow() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// decodeSigned reads an operator's request and checks its signature and
// its instant against the node's clock, answering the refusal itself when
// one fails.
func (c *Node) decodeSigned(w http.ResponseWriter, r *http.Request, req signedRequest) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(req); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", "body: "+err.Error())
		return false
	}
	what, at, got := req.signed()
	if !hmac.Equal([]byte(got), []byte(req.signature(c.cfg.Secret))) {
		writeErr(w, http.StatusForbidden, "WrongJoinSecret", what+": the request is not signed with this cluster's join secret")
		return false
	}
	if err := fresh(what, at, time.Now()); err != nil {
		writeRefusal(w, err)
		return false
	}
	return true
}

// staleRequest is a signed request's instant too far from the clock.
type staleRequest struct{ msg string }

func (e staleRequest) Error() string { return e.msg }

// fresh checks a signed instant against now.
func fresh(what, at string, now time.Time) error {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return vocab.Invalidf("at", "must be the RFC 3339 instant the request was signed at")
	}
	if d := now.Sub(t).Abs(); d > SignatureMax {
		return staleRequest{fmt.Sprintf("%s: at: signed %s, %v from this node's clock; a signed %s request is good for %v", what, at, d.Round(time.Second), what, SignatureMax)}
	}
	return nil
}

// handleTransfer hands a group's leadership over, at its leader (a
// request that reaches another node is refused naming the leader), and
// waits until the group has the new leader.
func (c *Node) handleTransfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if !c.decodeSigned(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var refusal error
	notLeader := false
	err := c.do(ctx, func(n *node.Node) {
		for _, st := range n.Status() {
			if st.Group != req.Group {
				continue
			}
			switch {
			case !slices.Contains(st.Voters, req.To):
				refusal = vocab.Invalidf("to", fmt.Sprintf("node %d is not a voter of group %d", req.To, req.Group))
			case st.Leader != c.cfg.NodeID:
				notLeader = true
			default:
				n.TransferLeader(req.Group, req.To)
			}
			return
		}
		refusal = vocab.NotFoundf("group", fmt.Sprintf("no group %d", req.Group))
	})
	if err == nil && notLeader {
		refusal = c.unavailable(req.Group, fmt.Errorf("%w: transfer leadership at the group's leader", node.ErrNotLeader))
	}
	if err == nil {
		err = refusal
	}
	if err == nil {
		err = c.waitLeader(ctx, req.Group, req.To)
	}
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"group": req.Group, "leader": req.To})
}

func (c *Node) waitLeader(ctx context.Context, group, to uint64) error {
	for {
		for _, g := range c.lastStatus() {
			if g.Group == group && g.Leader == to {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %d: node %d did not take over: %w", group, to, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// handleAdd commits a node's member record in the meta group.
func (c *Node) handleAdd(w http.ResponseWriter, r *http.Request) {
	var req AddRequest
	if !c.decodeSigned(w, r, &req) {
		return
	}
	m := req.Member
	switch {
	case m.ID == 0:
		writeErr(w, http.StatusBadRequest, "invalid", "member.id: required, not 0")
		return
	case m.RaftAddr == "" || m.Addr == "":
		writeErr(w, http.StatusBadRequest, "invalid", "member.raft_addr, member.addr: both required")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.addMember(ctx, m); err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"added": m, "cluster_id": c.id.ClusterID, "members": c.sm.Members()})
}

// handleRemove commits a node's removal in the meta group; each group's
// leader then takes it out of the group (refusing a change that would lose
// quorum).
func (c *Node) handleRemove(w http.ResponseWriter, r *http.Request) {
	var req RemoveRequest
	if !c.decodeSigned(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	data, _ := json.Marshal(replica.MetaCommand{Op: replica.OpMemberRemove, ID: req.ID})
	out, err := c.propose(ctx, node.MetaGroup, data)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"removed": req.ID, "members": c.sm.Members()})
}

// writeRefusal answers err as the API does: a retryable 503, a rule's
// refusal by its code, or a failure.
func writeRefusal(w http.ResponseWriter, err error) {
	var u *Unavailable
	var stale staleRequest
	if errors.As(err, &stale) {
		writeErr(w, http.StatusForbidden, CodeStaleRequest, stale.msg)
		return
	}
	if errors.As(err, &u) {
		ref := u.Refusal()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ref.Status)
		w.Write(ref.Document)
		return
	}
	if r, ok := vocab.As(err); ok {
		status := http.StatusConflict
		switch r.Code {
		case vocab.Invalid:
			status = http.StatusBadRequest
		case vocab.NotFound:
			status = http.StatusNotFound
		}
		writeErr(w, status, string(r.Code), err.Error())
		return
	}
	writeErr(w, http.StatusInternalServerError, "error", err.Error())
}
