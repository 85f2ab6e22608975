package cluster

// memberlist's hooks: the node's metadata, the coordinates carried on
// its acks, and what it says only in its log.

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
)

// metaIncarnation reads a member's incarnation from its memberlist
// metadata.
func metaIncarnation(b []byte) (uint64, bool) {
	var m struct {
		Inc uint64 `json:"inc"`
	}
	if json.Unmarshal(b, &m) != nil {
		return 0, false
	}
	return m.Inc, true
}

// gossipDelegate is memberlist's delegate: the node's metadata (its
// incarnation) and the layer's messages.
type gossipDelegate struct{ g *gossip }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	return mustJSON(map[string]uint64{"inc": d.g.inc})
}

// NotifyMsg hands a message to the loop; it must not block.
func (d gossipDelegate) NotifyMsg(b []byte) {
	select {
	case d.g.inbox <- slices.Clone(b):
	default:
	}
}

func (gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (gossipDelegate) LocalState(join bool) []byte                { return nil }
func (gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}

// gossipPing carries the node's coordinate on memberlist's acks and learns
// from each acknowledged probe's round trip.
type gossipPinger struct{ g *gossip }

func (p gossipPinger) AckPayload() []byte { return mustJSON(p.g.viv.Coordinate()) }

func (p gossipPinger) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	p.g.stats.probes.Add(1)
	id, err := strconv.ParseUint(other.Name, 10, 64)
	if err != nil {
		return
	}
	var c coordinate.Coordinate
	if json.Unmarshal(payload, &c) != nil {
		return
	}
	if err := p.g.viv.Observe(other.Name, &c, rtt); err != nil {
		p.g.log.Debug("coordinate not updated", "peer", id, "err", err)
		return
	}
	p.g.mu.Lock()
	v := p.g.peers[id]
	if v == nil {
		v = &peerView{}
		p.g.peers[id] = v
	}
	v.coord, v.rtt = &c, rtt
	v.mlSuspectAt = time.Time{}
	p.g.health = p.g.health.Answered()
	p.g.mu.Unlock()
}

// memberlistLog takes what memberlist v0.7.0 says only in its log (it
// has no hook for them): direct probes that timed out and went to
// indirect probes (counted), and its own suspicions (counted, and the
// member marked failing for the layer's own probe). It passes each line
// on at its level. TestLivenessStoppedNodeSettledDeadThenAlive fails if
// another memberlist words them otherwise.
type memberlistLog struct{ g *gossip }

func (w *memberlistLog) Write(b []byte) (int, error) {
	s := string(b)
	switch {
	case strings.Contains(s, "memberlist: Failed UDP ping:"):
		w.g.stats.indirect.Add(1)
	case strings.Contains(s, "memberlist: Suspect ") && strings.Contains(s, " has failed"):
		w.g.stats.mlSuspicions.Add(1)
		name := s[strings.Index(s, "memberlist: Suspect ")+len("memberlist: Suspect "):]
		name = name[:strings.Index(name, " has failed")]
		if id, err := strconv.ParseUint(name, 10, 64); err == nil {
			w.g.mu.Lock()
			v := w.g.peers[id]
			if v == nil {
				v = &peerView{}
				w.g.peers[id] = v
			}
			v.mlSuspectAt = time.Now()
			w.g.mu.Unlock()
		}
	}
	if strings.Contains(s, "[DEBUG]") {
		w.g.log.Debug(strings.TrimSpace(s))
	} else {
		w.g.log.Info(strings.TrimSpace(s))
	}
	return len(b), nil
}

var _ io.Writer = (*memberlistLog)(nil)
