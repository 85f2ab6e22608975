package cluster

// A move's routes between nodes (stage, command, fetch) and the calls
// that use them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"tally/cluster/replica"
	"tally/refuse"
	"tally/rest"
	"tally/service"
)

// moveStageRequest asks a node to stage a moving session's log up to a
// length, from a replica of the source group.
type moveStageRequest struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	From    uint64 `json:"from"`
	Upto    int64  `json:"upto"`
	Signed
}

func (r *moveStageRequest) envelope() (string, *Signed, []any) {
	return "move-stage", &r.Signed, []any{r.Tenant, r.Session, r.From, r.Upto}
}

// MoveFetchRequest asks a node for bytes of a session's log as its
// replica of a group holds them (a node's request to another, signed with
// the join secret; MoveFetchPath).
type MoveFetchRequest struct {
	Group   uint64 `json:"group"`
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Signed
}

func (r *MoveFetchRequest) envelope() (string, *Signed, []any) {
	return "move-fetch", &r.Signed, []any{r.Group, r.Tenant, r.Session, r.From, r.To}
}

// moveCommandRequest asks a node that holds a group to propose a move's
// command there (the mover does not hold every group).
type moveCommandRequest struct {
	Group   uint64          `json:"group"`
	Command json.RawMessage `json:"command"`
	Signed
}

func (r *moveCommandRequest) envelope() (string, *Signed, []any) {
	return "move-command", &r.Signed, []any{r.Group, string(r.Command)}
}

// OpMoveStage stages a moving session's log on this node.
func (c *Node) OpMoveStage(ctx context.Context, decode Decode) (any, error) {
	var req moveStageRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if req.Upto < 0 {
		if err := c.sm.Unstage(req.Tenant, req.Session); err != nil {
			return nil, err
		}
		return replica.LogEnd{}, nil
	}
	end, err := c.sm.Stage(ctx, req.Tenant, req.Session, req.From, req.Upto)
	if err != nil {
		return nil, refusal(err)
	}
	return end, nil
}

// OpMoveCommand proposes a move's command in a group this node holds.
func (c *Node) OpMoveCommand(ctx context.Context, decode Decode) (any, error) {
	var req moveCommandRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, moveStepTimeout)
	defer cancel()
	cmd, err := replica.DecodeCommand(req.Command)
	if err != nil || !moveMethod(cmd.Method) {
		return nil, refusal(refuse.Invalidf("command", "a move's command"))
	}
	out, err := c.propose(ctx, req.Group, req.Command)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return nil, refusal(err)
	}
	end, _ := out.Value.(replica.LogEnd)
	return end, nil
}

func moveMethod(m string) bool {
	switch m {
	case replica.MethodMoveProbe, replica.MethodMoveFence, replica.MethodMoveUnfence, replica.MethodMoveInstall, replica.MethodMoveDrop, replica.MethodMoveRetire:
		return true
	}
	return false
}

// OpMoveFetch writes bytes of a session's log as this node's replica of
// a group holds them.
func (c *Node) OpMoveFetch(ctx context.Context, decode Decode, w io.Writer) error {
	var req MoveFetchRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return err
	}
	if err := c.sm.ReadLog(req.Group, req.Tenant, req.Session, req.From, req.To, w); err != nil {
		return refusal(err)
	}
	return nil
}

// moveCommand commits a move's command in group, here if this node holds
// the group, else at a node that does.
func (c *Node) moveCommand(ctx context.Context, group uint64, method, tenant, session string, d replica.MoveDoc) (replica.LogEnd, error) {
	cmd, err := NewCommand(method, service.Call{Tenant: tenant, Session: session}, d, time.Now(), 0)
	if err != nil {
		return replica.LogEnd{}, err
	}
	data, err := cmd.Encode()
	if err != nil {
		return replica.LogEnd{}, err
	}
	if c.placedHere(group) == nil {
		out, err := c.propose(ctx, group, data)
		if err == nil {
			err = out.Err
		}
		if err != nil {
			return replica.LogEnd{}, err
		}
		end, _ := out.Value.(replica.LogEnd)
		return end, nil
	}
	var last error = fmt.Errorf("no node of group %d is known", group)
	for _, id := range c.groupNodes(group) {
		var end replica.LogEnd
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, moveCommandRequest{Group: group, Command: data})
		if last = c.callNode(ctx, id, MoveCommandPath, &req, &end); last == nil {
			return end, nil
		}
		var ref *rest.Refusal
		if errors.As(last, &ref) && ref.Status != http.StatusServiceUnavailable {
			return replica.LogEnd{}, last // decided: a refusal of the command
		}
	}
	return replica.LogEnd{}, last
}

// groupNodes are the nodes that hold group, other than this one: its
// recorded voters and learners, or every member when no factor is set.
func (c *Node) groupNodes(group uint64) []uint64 {
	var ids []uint64
	if conf, ok := c.sm.Policy().Groups[group]; ok && len(conf.Voters) > 0 {
		if conf.Leader != 0 && slices.Contains(conf.Voters, conf.Leader) {
			ids = append(ids, conf.Leader)
		}
		for _, id := range append(slices.Clone(conf.Voters), conf.Learners...) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	} else {
		for _, m := range c.sm.Members() {
			ids = append(ids, m.ID)
		}
	}
	return slices.DeleteFunc(ids, func(id uint64) bool { return id == c.cfg.NodeID })
}

// callNode posts a signed request to a member and decodes its answer
// into out; a refusal is returned as a *rest.Refusal.
func (c *Node) callNode(ctx context.Context, id uint64, path string, req any, out any) error {
	resp, err := c.postNode(ctx, id, path, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

// postNode posts a signed request to a member; an answer other than 200
// is returned as its refusal.
func (c *Node) postNode(ctx context.Context, id uint64, path string, req any) (*http.Response, error) {
	m, ok := c.sm.Member(id)
	if !ok || m.Addr == "" {
		return nil, fmt.Errorf("node %d has no address", id)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(m.Addr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		var doc struct {
			Code  string `json:"code"`
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &doc)
		return nil, rest.NewRefusal(resp.StatusCode, doc.Code, fmt.Sprintf("node %d: %s", id, firstOf(doc.Error, string(b))))
	}
	return resp, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fetchLog is the replica's Fetch: the bytes [from, to) of a session's
// log from a node that holds group, the first that has them.
func (c *Node) fetchLog(ctx context.Context, group uint64, tenant, session string, from, to int64, w io.Writer) error {
	var last error = fmt.Errorf("no other node holds group %d", group)
	cw := &countingWriter{w: w}
	for _, id := range c.groupNodes(group) {
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, MoveFetchRequest{Group: group, Tenant: tenant, Session: session, From: from + cw.n, To: to})
		resp, err := c.postNode(ctx, id, MoveFetchPath, &req)
		if err != nil {
			last = err
			continue
		}
		_, err = io.Copy(cw, resp.Body)
		resp.Body.Close()
		if err == nil && from+cw.n == to {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("node %d sent %d bytes of %d", id, cw.n, to-from)
		}
		last = err
		var verr interface{ Unwrap() error }
		if errors.As(err, &verr) && cw.bad {
			return err // a line that does not continue the chain
		}
	}
	return last
}

// countingWriter counts what w took, and notes a refusal of it.
type countingWriter struct {
	w   io.Writer
	n   int64
	bad bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.bad = true
	}
	return n, err
}

// stageAll has every node of the destination group stage the session's
// log up to upto, and returns the least any of them holds.
func (c *Node) stageAll(ctx context.Context, mv replica.Move, upto int64) (int64, error) {
	least := upto
	nodes := c.groupNodes(mv.To)
	if c.placedHere(mv.To) == nil {
		end, err := c.sm.Stage(ctx, mv.Tenant, mv.Session, mv.From, upto)
		if err != nil {
			return 0, fmt.Errorf("stage at node %d: %w", c.cfg.NodeID, err)
		}
		least = min(least, end.Length)
	}
	for _, id := range nodes {
		var end replica.LogEnd
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, moveStageRequest{Tenant: mv.Tenant, Session: mv.Session, From: mv.From, Upto: upto})
		if err := c.callNode(ctx, id, MoveStagePath, &req, &end); err != nil {
			return 0, fmt.Errorf("stage at node %d: %w", id, err)
		}
		least = min(least, end.Length)
	}
	return least, nil
}
