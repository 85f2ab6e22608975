package cluster

// The layer's messages between nodes (probes, reports, answers): their
// kinds and bodies, the loop that takes them, and sending one.

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"tally/cluster/liveness"
	"tally/cluster/replica"
)

// Messages of tally's layer, carried as memberlist user messages (so
// under its keyring), each a type byte and a JSON body.
const (
	msgPing   byte = 'p' // a direct probe with this node's own deadline
	msgPong   byte = 'o'
	msgReport byte = 'r' // a member's report to the meta group's leader
	msgAnswer byte = 'a' // the leader's answer to a report
)

type gossipPing struct {
	From  uint64 `json:"from"`
	Nonce uint64 `json:"nonce"`
}

// accusation is a member a reporter's probes failed, at the incarnation
// the reporter knew.
type accusation struct {
	Node        uint64 `json:"node"`
	Incarnation uint64 `json:"inc"`
	// Answered: the member spoke to the cluster before (its own alive
	// message put it in the reporter's memberlist, which suspects only
	// such members), so the decider may suspect it though it never heard
	// its report: one stopped before its first report reached the decider
	// is settled dead all the same.
	Answered bool `json:"answered,omitempty"`
}

// report is a member's once-a-period report to the meta group's leader:
// its incarnation, its witness (the ticks of its control loop it counted),
// its load, its health, and the members its probes failed. While it is
// suspected, the report is its request for late homework.
type report struct {
	From        uint64          `json:"from"`
	Incarnation uint64          `json:"inc"`
	Witness     uint64          `json:"witness"`
	Health      int             `json:"health"`
	Load        liveness.Load   `json:"load"`
	Suspects    []accusation    `json:"suspects,omitempty"`
	Leader      uint64          `json:"leader"`
	Coordinate  json.RawMessage `json:"coord,omitempty"`
	// Seq numbers the reporter's reports at its incarnation, so that the
	// leader hears one once when it comes both directly and passed on.
	Seq uint64 `json:"seq"`
	// Forwarded: a member that does not decide passed it on to the leader
	// it knows (once: a forwarded report is not passed again).
	Forwarded bool `json:"fwd,omitempty"`
}

// verdictRow is one member in the leader's table, as answered.
type verdictRow struct {
	Node        uint64         `json:"node"`
	State       liveness.State `json:"state"`
	Incarnation uint64         `json:"inc"`
	GrantsUsed  int            `json:"grants"`
	Health      int            `json:"health"`
}

// answer is the leader's answer to a report: the reporter's state, the
// homework decision if it asked, and the whole table.
type answer struct {
	Leader      uint64         `json:"leader"`
	State       liveness.State `json:"state"`
	Incarnation uint64         `json:"inc"`
	Denial      string         `json:"denial,omitempty"`
	Detail      string         `json:"detail,omitempty"`
	GrantMillis int64          `json:"grant_ms,omitempty"`
	Asked       bool           `json:"asked,omitempty"`
	// Known is the incarnation the deciding table holds for the reporter:
	// above the reporter's own (its kept incarnation was lost), it must
	// speak above it to be heard at all.
	Known uint64       `json:"known,omitempty"`
	Table []verdictRow `json:"table"`
	// Notice: not an answer to a report but the leader telling a member
	// that a suspicion of it began, so that it asks for late homework at
	// once rather than at its next round (it may be stopped again by then).
	Notice bool `json:"notice,omitempty"`
}

// msgDone is the loop's own message: a fact's proposal ended.
const msgDone byte = 'd'

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// handle takes one message on the loop.
func (g *gossip) handle(ctx context.Context, b []byte, now time.Time) {
	if len(b) < 2 {
		return
	}
	body := b[1:]
	switch b[0] {
	case msgDone:
		var f replica.LivenessFact
		if json.Unmarshal(body, &f) == nil {
			delete(g.pending, f.Node)
		}
	case msgPing:
		var p gossipPing
		if json.Unmarshal(body, &p) == nil {
			if m, ok := g.c.sm.Member(p.From); ok {
				go g.send(m, msgPong, gossipPing{From: g.c.cfg.NodeID, Nonce: p.Nonce})
			}
		}
	case msgPong:
		var p gossipPing
		if json.Unmarshal(body, &p) == nil {
			g.mu.Lock()
			if v := g.peers[p.From]; v != nil && v.probeNonce == p.Nonce && !now.After(v.probeDue) {
				v.probeAnswer = true
			}
			g.mu.Unlock()
		}
	case msgReport:
		var r report
		if json.Unmarshal(body, &r) == nil && r.From != 0 {
			if g.det == nil {
				g.relayReport(r)
				return
			}
			g.hear(ctx, r, now)
		}
	case msgAnswer:
		var a answer
		if json.Unmarshal(body, &a) == nil {
			g.answered(ctx, a, now)
		}
	}
}

// send sends a message of the layer to member m, best effort (UDP).
func (g *gossip) send(m replica.Member, kind byte, v any) {
	b := append([]byte{kind}, mustJSON(v)...)
	if err := g.ml.SendToAddress(memberlist.Address{Addr: gossipAddrOf(m), Name: strconv.FormatUint(m.ID, 10)}, b); err != nil {
		g.log.Debug("gossip: send", "to", m.ID, "err", err)
	}
}
