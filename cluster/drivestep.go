package cluster

// The placement driver's steps as values: what a group's leader does
// with its group (LeaderStep, CarryOutStep), and what the meta group's
// leader commits (DecideStep). They read no clock and do no I/O beyond
// what they are given, so the node's loop (drive) and the simulator run
// the same decisions, each on its own clock and its own proposals.

import (
	"fmt"
	"maps"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// DriverState is what the meta leader's driver keeps between its passes:
// when it first saw each decision in flight.
type DriverState struct {
	seen map[uint64]time.Time // decision → first seen in flight
}

// NewDriverState is a driver that has seen nothing yet.
func NewDriverState() *DriverState { return &DriverState{seen: map[uint64]time.Time{}} }

// Forget drops what the driver saw: it no longer leads the meta group.
func (s *DriverState) Forget() { clear(s.seen) }

// LeaderWork is what a group's leader does with its group in a pass.
type LeaderWork struct {
	Kind LeaderKind
	// To is the voter a LeaderTransfer hands the group to.
	To uint64
	// Decision is the one a LeaderCarryOut carries out.
	Decision replica.Decision
	// Conf is the group's configuration as its leader sees it; Rec as
	// the meta group records it, if Recorded.
	Conf, Rec replica.GroupConf
	Recorded  bool
}

// LeaderKind says what a LeaderWork is.
type LeaderKind int

const (
	// LeaderIdle: nothing to do now (a joint configuration being left,
	// or a decision taking this leader out and no voter caught up to
	// hand the group to).
	LeaderIdle LeaderKind = iota
	// LeaderRecord: record Conf in the meta group.
	LeaderRecord
	// LeaderCarryOut: carry out Decision (CarryOutStep).
	LeaderCarryOut
	// LeaderTransfer: hand the group to To, which carries out the
	// decision that takes this leader out.
	LeaderTransfer
)

// LeaderStep is the work of the leader me of a group (st, with the
// group's commit and each member's match) under the recorded policy: its
// decision in flight to carry out, or its configuration to record when
// it differs from the one recorded.
func LeaderStep(me uint64, st node.GroupStatus, commit uint64, match map[uint64]uint64, pol replica.Policy) LeaderWork {
	rec, recorded := pol.Groups[st.Group]
	conf := replica.GroupConf{Voters: slices.Clone(st.Voters), Learners: slices.Clone(st.Learners), Leader: me, Epoch: rec.Epoch, Bytes: rec.Bytes}
	for _, l := range st.Learners {
		if match[l] >= commit {
			conf.CaughtUp = append(conf.CaughtUp, l)
		}
	}
	w := LeaderWork{Conf: conf, Rec: rec, Recorded: recorded}
	if len(st.Leaving) > 0 {
		return w // a joint configuration not left yet: no change can start
	}
	if d, ok := pol.InFlight(st.Group); ok {
		if takesOut(d) == me && !made(d, conf) {
			// A leader does not take itself out: it hands the group to a
			// caught-up voter, which carries the decision out.
			for _, v := range st.Voters {
				if v != me && match[v] >= commit {
					w.Kind, w.To = LeaderTransfer, v
					return w
				}
			}
			return w
		}
		w.Kind, w.Decision = LeaderCarryOut, d
		return w
	}
	if confChanged(rec, recorded, conf) {
		w.Kind = LeaderRecord
	}
	return w
}

// CarryOutStep is how a group's leader carries out a decision d, the
// group at conf as it sees it and rec as recorded: the raft change to
// propose, or, when none is to be made, the decision's end at once (done
// if conf shows it made, abandoned if the group moved past it).
func CarryOutStep(d replica.Decision, conf, rec replica.GroupConf) (cc *pb.ConfChangeV2, state, why string) {
	switch {
	case made(d, conf):
		return nil, replica.DecisionDone, ""
	case rec.Epoch > d.Epoch:
		return nil, replica.DecisionAbandoned, fmt.Sprintf("the group's configuration moved to epoch %d without it (decided at %d)", rec.Epoch, d.Epoch)
	case (d.Op == placement.Promote || d.Op == placement.Replace) && !slices.Contains(conf.Learners, d.Node), d.Op == placement.Demote && !slices.Contains(conf.Voters, d.Node):
		// Decided on a recorded configuration the group has left (a
		// promotion of a learner since removed would add a voter that
		// never caught up).
		return nil, replica.DecisionAbandoned, fmt.Sprintf("node %d is not a %s of the group now", d.Node, map[bool]string{true: "learner", false: "voter"}[d.Op != placement.Demote])
	case d.Op == placement.Replace && !slices.Contains(conf.Voters, d.Replaces):
		return nil, replica.DecisionAbandoned, fmt.Sprintf("node %d, which it replaces, is not a voter of the group now", d.Replaces)
	}
	return decisionChange(d), "", ""
}

// AfterChange is the group's configuration once a decision's change
// applied (r), to record with the decision's end: its placement epoch is
// the change's raft index.
func AfterChange(conf replica.GroupConf, r node.ConfResult) replica.GroupConf {
	after := conf
	after.Voters, after.Learners, after.Epoch, after.CaughtUp = r.Conf.GetVoters(), r.Conf.GetLearners(), r.Index, nil
	return after
}

// MetaWork is one proposal the meta leader's driver makes: a decision
// (replica.OpDecide) or a decision's end (replica.OpDecided). Key is
// what it holds pending until answered: its group + decideKey.
type MetaWork struct {
	Key uint64
	Cmd replica.MetaCommand
}

// DecideStep is the meta leader me's pass at now: end the decisions in
// flight that the recorded configurations show made, abandon those the
// group moved past or that stayed in flight beyond abandonAfter as this
// leader watched them, and decide the next change of each group with none
// in flight (placement.Next), within the named limits. A group whose key
// is pending is left alone; each work's key is marked pending.
func DecideStep(me uint64, now time.Time, nodes []placement.Node, constraints map[uint64]placement.Constraint, pol replica.Policy, ds *DriverState, pending map[uint64]bool) []MetaWork {
	var out []MetaWork
	end := func(key uint64, d replica.Decision, state, why string) {
		pending[key] = true
		out = append(out, MetaWork{Key: key, Cmd: replica.MetaCommand{Op: replica.OpDecided, Decision: &replica.Decision{ID: d.ID, Group: d.Group, State: state, Error: why}}})
	}
	flying := 0
	toward := map[uint64]int{}
	for _, d := range pol.Decisions {
		if d.State != replica.DecisionInFlight {
			delete(ds.seen, d.ID)
			continue
		}
		flying++
		if d.Op == placement.AddLearner {
			toward[d.Node]++
		}
		if _, ok := ds.seen[d.ID]; !ok {
			ds.seen[d.ID] = now
		}
		key := d.Group + decideKey
		if pending[key] {
			continue
		}
		rec := pol.Groups[d.Group]
		switch {
		case made(d, rec):
			end(key, d, replica.DecisionDone, "")
		case rec.Epoch > d.Epoch:
			end(key, d, replica.DecisionAbandoned, fmt.Sprintf("the group's configuration moved to epoch %d without it (decided at %d); the driver decides again", rec.Epoch, d.Epoch))
		case now.Sub(ds.seen[d.ID]) > abandonAfter:
			end(key, d, replica.DecisionAbandoned, fmt.Sprintf("in flight for more than %v under meta leader %d; the driver decides again", abandonAfter, me))
		}
		// Otherwise resumed: the group's leader carries it out.
	}
	for _, group := range slices.Sorted(maps.Keys(pol.Groups)) {
		key := group + decideKey
		if _, ok := pol.InFlight(group); ok || pending[key] {
			continue
		}
		rec := pol.Groups[group]
		g := placement.Group{ID: group, Meta: group == node.MetaGroup, Voters: rec.Voters, Learners: rec.Learners, CaughtUp: rec.CaughtUp, Constraint: constraints[group], Bytes: rec.Bytes}
		ch := placement.Next(nodes, g, pol.Replicas).Change
		switch {
		case ch == nil:
			continue
		case ch.Optional && flying > 0:
			continue // a spread or load move waits for a quiet cluster
		case ch.Op == placement.AddLearner && toward[ch.Node] >= SnapshotsPerNodeMax:
			continue
		}
		flying++
		if ch.Op == placement.AddLearner {
			toward[ch.Node]++
		}
		pending[key] = true
		d := replica.Decision{Group: group, Op: ch.Op, Node: ch.Node, Replaces: ch.Replaces, Reason: ch.Reason, Epoch: rec.Epoch, By: me}
		out = append(out, MetaWork{Key: key, Cmd: replica.MetaCommand{Op: replica.OpDecide, Decision: &d}})
	}
	return out
}
