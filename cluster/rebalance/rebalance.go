// Package rebalance is the pure rule by which the placement driver spreads
// sessions over the data groups: which members a new group starts on,
// which session to move from which group to which, and when every group
// is so full that the cluster needs another. It does no I/O and reads no
// clock: the driver hands it the groups' loads it measured.
package rebalance

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"tally/cluster/placement"
)

// Voters picks a new group's voters: n of the members that are neither
// dead nor draining (every such member when n < 1, a cluster that makes
// every member a voter), fewest replicas first, then fewest bytes, then
// lowest id, a zone not used yet before one that is. Fewer than n are
// returned when fewer are eligible (the driver reports the group short
// and grows it as members join).
func Voters(nodes []placement.Node, n int) []uint64 {
	var ok []placement.Node
	for _, nd := range nodes {
		if !nd.Dead && !nd.Draining {
			ok = append(ok, nd)
		}
	}
	slices.SortFunc(ok, func(a, b placement.Node) int {
		return cmp.Or(cmp.Compare(a.Replicas, b.Replicas), cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.ID, b.ID))
	})
	if n < 1 || n > len(ok) {
		n = len(ok)
	}
	var out []uint64
	zones := map[string]bool{}
	for len(out) < n {
		i := slices.IndexFunc(ok, func(nd placement.Node) bool { return !zones[nd.Zone] })
		if i < 0 {
			i = 0
		}
		out = append(out, ok[i].ID)
		zones[ok[i].Zone] = true
		ok = slices.Delete(ok, i, i+1)
	}
	slices.Sort(out)
	return out
}

// Session is one session's load in its group: its log's bytes and the
// rate its log grew at, in bytes a second, over the driver's last two
// measurements.
type Session struct {
	Name  string
	Bytes int64
	Rate  float64
	// Pinned: the session may not move (a constraint binds it, or it is
	// moving already).
	Pinned bool
}

// Group is one data group's load: its sessions'.
type Group struct {
	ID       uint64
	Sessions []Session
	// Rest is the bytes of the group's sessions not listed (a group lists
	// its largest only).
	Rest int64
}

// Bytes is the group's sessions' bytes.
func (g Group) Bytes() int64 {
	n := g.Rest
	for _, s := range g.Sessions {
		n += s.Bytes
	}
	return n
}

// Rate is the group's sessions' write rate.
func (g Group) Rate() float64 {
	var r float64
	for _, s := range g.Sessions {
		r += s.Rate
	}
	return r
}

// Thresholds are the rule's named bounds.
type Thresholds struct {
	// Start: the driver begins moving sessions when a group's load is
	// above the mean by more than this fraction of it; Stop: it goes on
	// until every group is within this fraction (Stop < Start: the
	// hysteresis, so loads near a bound do not start and stop moves in
	// turn).
	Start, Stop float64
	// MinBytes: below this much in every group the driver moves nothing
	// (a young cluster's spread is noise).
	MinBytes int64
	// GroupFull: when every data group holds more than this, the driver
	// adds a group.
	GroupFull int64
}

// movableShare: the driver moves sessions off a group only when those
// that may move carry at least this share of its load above the mean.
const movableShare = 0.5

// Default are the driver's thresholds.
var Default = Thresholds{Start: 0.25, Stop: 0.10, MinBytes: 1 << 20, GroupFull: 8 << 30}

// Move is a session to move from one group to another.
type Move struct {
	Session  string
	From, To uint64
}

// Plan is the rule's answer for one pass.
type Plan struct {
	// Move is the session to move, if any.
	Move *Move
	// AddGroup: every group is above GroupFull.
	AddGroup bool
	// Balancing is whether the groups are out of balance (the hysteresis
	// state the driver passes back on its next pass).
	Balancing bool
	Reason    string
}

// Next decides the driver's pass from the groups' loads. balancing is the
// state the previous pass answered (false at a new meta leader: the rule
// then starts only at Start). A move goes from the most loaded group to
// the least, and only a session whose move strictly lowers the sum of
// the squares of the groups' loads (each load the group's share of the
// bytes plus its share of the write rate): every move lowers it, so moves
// cannot cycle, and they stop.
func Next(groups []Group, th Thresholds, balancing bool) Plan {
	if len(groups) == 0 {
		return Plan{Reason: "no data groups"}
	}
	var bytes int64
	var rate float64
	full := true
	for _, g := range groups {
		b := g.Bytes()
		bytes += b
		rate += g.Rate()
		full = full && b > th.GroupFull
	}
	if full {
		return Plan{AddGroup: true, Balancing: balancing, Reason: fmt.Sprintf("every data group holds more than %d bytes", th.GroupFull)}
	}
	if len(groups) < 2 {
		return Plan{Reason: "one data group"}
	}
	load := func(b int64, r float64) float64 {
		l := float64(b) / float64(max(bytes, 1))
		if rate > 0 {
			l += r / rate
		}
		return l
	}
	loads := make([]float64, len(groups))
	hi, lo := 0, 0
	var sum float64
	for i, g := range groups {
		loads[i] = load(g.Bytes(), g.Rate())
		sum += loads[i]
		if loads[i] > loads[hi] || (loads[i] == loads[hi] && g.ID < groups[hi].ID) {
			hi = i
		}
		if loads[i] < loads[lo] || (loads[i] == loads[lo] && g.ID < groups[lo].ID) {
			lo = i
		}
	}
	mean := sum / float64(len(groups))
	band := th.Start
	if balancing {
		band = th.Stop
	}
	if groups[hi].Bytes() < th.MinBytes && bytes < th.MinBytes*int64(len(groups)) {
		return Plan{Reason: fmt.Sprintf("less than %d bytes in the groups", th.MinBytes)}
	}
	if loads[hi] <= mean*(1+band) {
		return Plan{Reason: fmt.Sprintf("group %d is within %.0f%% of the mean load", groups[hi].ID, band*100)}
	}
	// The session whose move brings the two groups' loads closest, among
	// those below their gap (so every move lowers the sum of squares)
	// that leave the destination below the source's load by at least a
	// quarter of its excess over the mean (no churn of a session so large
	// the destination only takes the source's place). Moving is worth it
	// only when such sessions carry at least movableShare of that excess:
	// a group hot for one session too large to move keeps its small ones.
	gap, excess := loads[hi]-loads[lo], loads[hi]-mean
	best, bestLeft, movable := -1, 0.0, 0.0
	for i, s := range groups[hi].Sessions {
		if s.Pinned {
			continue
		}
		l := load(s.Bytes, s.Rate)
		if l <= 0 || l >= gap || loads[lo]+l > loads[hi]-excess/4 {
			continue
		}
		movable += l
		left := math.Abs(gap - 2*l)
		if best < 0 || left < bestLeft || (left == bestLeft && s.Name < groups[hi].Sessions[best].Name) {
			best, bestLeft = i, left
		}
	}
	if best >= 0 && movable < excess*movableShare {
		return Plan{Balancing: true, Reason: fmt.Sprintf("group %d is above the mean load, but the sessions that could move carry less than %.0f%% of its excess (one session too large to move dominates it)", groups[hi].ID, movableShare*100)}
	}
	if best < 0 {
		return Plan{Balancing: true, Reason: fmt.Sprintf("group %d is above the mean load, but no session of it moves to group %d without taking its place", groups[hi].ID, groups[lo].ID)}
	}
	s := groups[hi].Sessions[best]
	return Plan{Balancing: true, Move: &Move{Session: s.Name, From: groups[hi].ID, To: groups[lo].ID},
		Reason: fmt.Sprintf("group %d's load is above the mean by more than %.0f%%: %s moves to group %d, the least loaded", groups[hi].ID, band*100, s.Name, groups[lo].ID)}
}
