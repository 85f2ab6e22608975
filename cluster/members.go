package cluster

import (
	"context"
	"strconv"
	"time"

	"tally/cluster/liveness"
	"tally/cluster/replica"
)

// MembersPath is the route of the members' liveness (tally cluster
// members).
const MembersPath = "/v1/cluster/members"

// MemberLiveness is one member with its liveness as the node asked sees
// it: its state and incarnation from the meta group leader's deciding
// table (as last answered to this node), its health score as it reported
// it, the round trip this node's coordinate predicts to it, the grants it
// used at its incarnation, and the settled fact the meta group holds.
type MemberLiveness struct {
	replica.Member
	// State is alive, suspect or dead.
	State       liveness.State `json:"state"`
	Incarnation uint64         `json:"incarnation"`
	HealthScore int            `json:"health_score"`
	// RTTMillis and RTTErrorMillis are the coordinate-predicted round trip
	// from the node asked and its error margin; RTTKnown is false while
	// too few round trips were seen (the probe deadline is then the
	// conservative one).
	RTTMillis      float64 `json:"rtt_ms"`
	RTTErrorMillis float64 `json:"rtt_error_ms"`
	RTTKnown       bool    `json:"rtt_known"`
	// ProbeDeadlineMillis is this node's probe deadline to it now.
	ProbeDeadlineMillis int64 `json:"probe_deadline_ms"`
	GrantsUsed          int   `json:"grants_used"`
	// Settled is the meta group's committed fact, if any.
	Settled *replica.LivenessFact `json:"settled,omitempty"`
}

// Members is the members document.
type Members struct {
	SchemaVersion int    `json:"schema_version"`
	NodeID        uint64 `json:"node_id"`
	// Decider is the meta group's leader whose table the states are from
	// (0: none answered this node yet).
	Decider uint64           `json:"decider"`
	Members []MemberLiveness `json:"members"`
}

// OpMembers reports the members' liveness as this node sees it.
func (c *Node) OpMembers(ctx context.Context, _ Decode) (any, error) { return c.Members(), nil }

// Members is the members' liveness as this node sees it.
func (c *Node) Members() Members {
	g := c.gossip
	out := Members{SchemaVersion: 1, NodeID: c.cfg.NodeID, Members: []MemberLiveness{}}
	g.mu.Lock()
	defer g.mu.Unlock()
	out.Decider = g.last.Leader
	for _, m := range c.sm.Members() {
		ml := MemberLiveness{Member: m, State: liveness.Alive}
		if f, ok := c.sm.Liveness(m.ID); ok {
			ml.Settled = &f
			ml.Incarnation = f.Incarnation
			if f.State == replica.LivenessDead {
				ml.State = liveness.Dead
			}
		}
		if row, ok := g.table[m.ID]; ok && row.Incarnation >= ml.Incarnation {
			ml.State, ml.Incarnation, ml.GrantsUsed, ml.HealthScore = row.State, row.Incarnation, row.GrantsUsed, row.Health
		}
		if m.ID == c.cfg.NodeID {
			ml.State, ml.Incarnation, ml.HealthScore = liveness.Alive, g.inc, g.health.Score()
			if row, ok := g.table[m.ID]; ok && row.Incarnation == g.inc {
				ml.State = row.State
			}
		} else if p := g.peers[m.ID]; p != nil {
			est := g.viv.Estimate(strconv.FormatUint(m.ID, 10), p.coord)
			ml.RTTKnown = est.Valid
			ml.RTTMillis, ml.RTTErrorMillis = millis(est.RTT), millis(est.Margin)
			ml.ProbeDeadlineMillis = liveness.ProbeDeadline(est, g.health).Milliseconds()
			if p.inc > ml.Incarnation {
				ml.Incarnation = p.inc
			}
		}
		out.Members = append(out.Members, ml)
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
