package cluster

// Healing and draining, asked by an operator with requests signed by the
// join secret: mark-dead commits a node dead (replica.OpLiveness, source
// operator), after which the placement driver replaces its replicas on
// live nodes; drain marks a node draining, after which the driver moves
// every replica off it, and remove-node then takes it out.

import (
	"context"
	"fmt"
	"slices"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
	"tally/refuse"
)

// Routes of the healing requests (signed).
const (
	MarkDeadPath = "/v1/cluster/mark-dead"
	DrainPath    = "/v1/cluster/drain"
)

// MarkDeadRequest commits a node dead.
type MarkDeadRequest struct {
	ID uint64 `json:"id"`
	Signed
}

// DrainRequest marks a node draining.
type DrainRequest struct {
	ID uint64 `json:"id"`
	Signed
}

func (r *MarkDeadRequest) envelope() (string, *Signed, []any) {
	return "mark-dead", &r.Signed, []any{r.ID}
}

func (r *DrainRequest) envelope() (string, *Signed, []any) {
	return "drain", &r.Signed, []any{r.ID}
}

// OpMarkDead commits a node dead at its recorded incarnation (0 if none).
// Refused, with nothing recorded: a node that is not a member (404), the
// node asked (it is alive: it answers), and a node that is the last voter
// of a group (409: nothing could replace its copy).
func (c *Node) OpMarkDead(ctx context.Context, decode Decode) (any, error) {
	var req MarkDeadRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if err := c.checkMarkDead(req.ID); err != nil {
		return nil, refusal(err)
	}
	var inc uint64
	if f, ok := c.sm.Liveness(req.ID); ok {
		inc = f.Incarnation
	}
	fact := replica.LivenessFact{Node: req.ID, Incarnation: inc, State: replica.LivenessDead, Source: replica.LivenessOperator, Reason: "marked dead by an operator"}
	out, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpLiveness, Liveness: &fact})
	if err != nil {
		return nil, refusal(err)
	}
	return map[string]any{"dead": req.ID, "fact": out.Value}, nil
}

// checkMarkDead refuses marking dead a node that is not a member, this
// node, or the last voter of a group.
func (c *Node) checkMarkDead(id uint64) error {
	if _, ok := c.sm.Member(id); !ok {
		return refuse.NotFoundf("id", fmt.Sprintf("node %d is not a member", id))
	}
	if id == c.cfg.NodeID {
		return refuse.Conflictf("id", fmt.Sprintf("node %d is the node asked, and it answers: ask another node to mark it dead", id))
	}
	for g, conf := range c.sm.Policy().Groups {
		if len(conf.Voters) == 1 && conf.Voters[0] == id {
			return refuse.Conflictf("id", fmt.Sprintf("node %d is the last voter of group %d: nothing could replace its copy", id, g))
		}
	}
	for _, st := range c.lastStatus() {
		if _, rec := c.sm.Policy().Groups[st.Group]; !rec && len(st.Voters) == 1 && st.Voters[0] == id {
			return refuse.Conflictf("id", fmt.Sprintf("node %d is the last voter of group %d: nothing could replace its copy", id, st.Group))
		}
	}
	return nil
}

// OpDrain marks a node draining, refused up front (409, nothing recorded)
// when the members left could not hold what the groups want (the
// replication factor); 404 for a node that is not a member.
func (c *Node) OpDrain(ctx context.Context, decode Decode) (any, error) {
	var req DrainRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if _, ok := c.sm.Member(req.ID); !ok {
		return nil, refusal(refuse.NotFoundf("id", fmt.Sprintf("node %d is not a member", req.ID)))
	}
	pol := c.sm.Policy()
	replicas := pol.Replicas
	if replicas == 0 {
		return nil, refusal(refuse.Conflictf("replicas", "the cluster has no replication factor (every member is a voter): configure one first (tally cluster configure --replicas N)"))
	}
	nodes := placementNodes(c.sm.Members(), pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	if err := placement.CheckDrain(nodes, req.ID, replicas, constraintsOf(constraints)); err != nil {
		return nil, refusal(refuse.Conflictf("id", err.Error()))
	}
	if _, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpDrain, ID: req.ID}); err != nil {
		return nil, refusal(err)
	}
	pol = c.sm.Policy()
	return map[string]any{"draining": pol.Draining, "holds": nonNil(holdsReplicas(pol, req.ID))}, nil
}

// holdsReplicas lists the data groups whose recorded configuration holds
// the node.
func holdsReplicas(pol replica.Policy, id uint64) []uint64 {
	var out []uint64
	for g, conf := range pol.Groups {
		if g != node.MetaGroup && (slices.Contains(conf.Voters, id) || slices.Contains(conf.Learners, id)) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}
