package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"tally/cluster"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/service"
)

// Placement in a run (Options.Place): the placer places the first session
// in the data group after its hash's, as a node's tally cluster place
// does: a Fence in the session's hash's group, then placement.set in the
// meta group, each proposed through some live node and retried elsewhere
// until answered, through the faults. Racing the clients' first writes to
// the session, the fence is refused once the session has a record, and
// the placement stops there; waiting, the clients leave the session alone
// until the placement is done. Clients refused as moved (a node that has
// not applied the placement yet) retry, as a node's routing would go
// elsewhere.
const (
	PlaceNone  = iota
	PlaceRace  // the placer races the clients' first writes
	PlaceFirst // the clients use the session once it is placed
)

// placer is the run's placement, one step at a time.
type placer struct {
	session  string
	from, to uint64
	step     int
	attempt  int // never reset, so a late answer to an earlier step is ignored
}

// The placer's steps.
const (
	stepFence = iota
	stepRecord
	stepDone
)

func (w *World) startPlacer() {
	s := sessionName(0)
	from := replica.GroupOf(w.opt.Groups, tenant, s)
	to := node.MetaGroup + 1 + (from-node.MetaGroup)%uint64(w.opt.Groups)
	w.placer = &placer{session: s, from: from, to: to}
	w.after(time.Duration(w.rng.IntN(100))*time.Millisecond, func() { w.placeAttempt(w.placer) })
}

// waitsForPlacer reports whether clients leave session alone for now.
func (w *World) waitsForPlacer(session string) bool {
	return w.opt.Place == PlaceFirst && w.placer.step != stepDone && session == w.placer.session
}

// placeAttempt proposes the placer's step through some live node.
func (w *World) placeAttempt(p *placer) {
	if w.err != nil || p.step == stepDone {
		return
	}
	p.attempt++
	a, step := p.attempt, p.step
	// An answer counts for the attempt, and the step, that proposed it.
	live := func() bool { return p.attempt == a && p.step == step }
	w.through(live, func() { w.placeAttempt(p) }, func(sn *simNode, retry func()) {
		group, data, err := w.placeCommand(p)
		if err != nil {
			w.fail("placer: %v", err)
			return
		}
		w.proposeTaken(sn, group, data, live, retry, func(out replica.Outcome) { w.placed(p, out) })
	})
}

// placeCommand is the entry of the placer's step and its group.
func (w *World) placeCommand(p *placer) (uint64, []byte, error) {
	if p.step == stepFence {
		cmd, err := cluster.NewCommand(replica.MethodFence, service.Call{Tenant: tenant, Session: p.session}, replica.FenceDoc{Group: p.to}, w.clock.Now(), 0)
		if err != nil {
			return 0, nil, err
		}
		data, err := cmd.Encode()
		return p.from, data, err
	}
	data, err := json.Marshal(replica.MetaCommand{Op: replica.OpPlacementSet, Placement: &replica.Placement{Tenant: tenant, Session: p.session, Group: p.to}, TS: w.now})
	return node.MetaGroup, data, err
}

// placed takes a step's outcome: the next step, or the end.
func (w *World) placed(p *placer, out replica.Outcome) {
	r, refused := refuse.As(out.Err)
	switch {
	case p.step == stepFence && out.Err == nil:
		p.step = stepRecord
		w.after(time.Millisecond, func() { w.placeAttempt(p) })
	case p.step == stepFence && refused && r.Code == refuse.Conflict && strings.Contains(r.Rule, "already has"):
		p.step = stepDone
		w.stats.PlacementsRefused++
	case p.step == stepRecord && out.Err == nil:
		p.step = stepDone
		w.stats.Placements++
	default:
		w.fail("placing %s in group %d: step %d: %v", p.session, p.to, p.step, out.Err)
	}
}

// moved reports whether a client's command was refused as moved.
func moved(err error) bool {
	var mv *replica.Moved
	return errors.As(err, &mv) || moving(err)
}

// checkPlacement requires the meta group's replicas to have the same
// directory, the placer to have finished, and, for a placement recorded,
// the session fenced on every replica of its hash's group and its log,
// where there is one, held by the group it is placed in on every replica
// of that group. It returns each session's group.
func (w *World) checkPlacement(members map[uint64][]*simNode) (map[string]uint64, error) {
	metas := members[node.MetaGroup]
	ref := metas[0].sm.Placements()
	for _, sn := range metas[1:] {
		if ps := sn.sm.Placements(); !slices.Equal(ps, ref) {
			return nil, fmt.Errorf("node %d's directory %v differs from node %d's %v", sn.id, ps, metas[0].id, ref)
		}
		// The directory's ranges follow from its content alone: the same
		// on every replica, however each came by it (applied, restarted,
		// installed from a snapshot).
		if a, b := sn.sm.Directory().Ranges(), metas[0].sm.Directory().Ranges(); !slices.Equal(a, b) {
			return nil, fmt.Errorf("node %d's directory's ranges %v differ from node %d's %v", sn.id, a, metas[0].id, b)
		}
	}
	groups := map[string]uint64{}
	for _, s := range w.sessions() {
		groups[s] = metas[0].sm.GroupOf(tenant, s)
	}
	p := w.placer
	if p == nil {
		return groups, nil
	}
	if p.step != stepDone {
		return nil, fmt.Errorf("the placement of %s never completed after the faults healed (step %d)", p.session, p.step)
	}
	if w.stats.PlacementsRefused > 0 {
		if len(ref) > 0 {
			return nil, fmt.Errorf("a refused placement is in the directory: %v", ref)
		}
		return groups, nil
	}
	if want := []replica.Placement{{Tenant: tenant, Session: p.session, Group: p.to}}; !slices.Equal(ref, want) {
		return nil, fmt.Errorf("the directory is %v, want %v", ref, want)
	}
	for _, sn := range members[p.from] {
		if g, ok := sn.sm.FencedTo(p.from, tenant, p.session); !ok || g != p.to {
			return nil, fmt.Errorf("node %d: %s is not fenced in group %d", sn.id, p.session, p.from)
		}
	}
	for _, sn := range members[p.to] {
		if log, err := readLog(sn.dir, p.session); err == nil && len(log) > 0 && sn.sm.Holder(tenant, p.session) != p.to {
			return nil, fmt.Errorf("node %d holds %s's log for group %d, not %d", sn.id, p.session, sn.sm.Holder(tenant, p.session), p.to)
		}
	}
	return groups, nil
}
