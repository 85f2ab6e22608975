package replica

import (
	"fmt"
	"testing"

	"tally/cluster/placement"
	"tally/vocab"
)

func TestDecideLiveness(t *testing.T) {
	members := []Member{{ID: 1}, {ID: 2}}
	dead := func(inc uint64) MetaCommand {
		return MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 2, Incarnation: inc, State: LivenessDead, Source: LivenessOperator}, TS: 5}
	}
	alive := func(inc uint64) MetaCommand {
		return MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 2, Incarnation: inc, State: LivenessAlive, Source: LivenessDetector}, TS: 6}
	}
	var facts []LivenessFact
	for i, tc := range []struct {
		c    MetaCommand
		want string // the error, or the fact recorded for node 2
	}{
		{MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 9, State: LivenessDead}}, "not_found: node: node 9 is not a member"},
		{MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 2, State: "gone"}}, `invalid: liveness.state: "gone" is not alive or dead`},
		{MetaCommand{Op: OpLiveness}, "invalid: liveness: required, with a node"},
		{alive(1), "2@1 alive detector"},
		{dead(1), "2@1 dead operator"},
		{dead(1), "2@1 dead operator"},
		{alive(1), "conflict: liveness.state: node 2 is dead at incarnation 1: a dead node comes back only with a higher incarnation"},
		{dead(0), "conflict: liveness.incarnation: node 2 is at incarnation 1; 0 is stale"},
		{alive(2), "2@2 alive detector"},
	} {
		next, out := decideLiveness(facts, members, tc.c)
		got := ""
		if out.Err != nil {
			got = errCode(out.Err)
			if len(next) != len(facts) {
				t.Errorf("step %d: refused, and the facts changed", i)
			}
		} else {
			f := next[0]
			got = fmt.Sprintf("%d@%d %s %s", f.Node, f.Incarnation, f.State, f.Source)
		}
		if got != tc.want {
			t.Errorf("step %d:\n got  %s\n want %s", i, got, tc.want)
		}
		facts = next
	}
}

// errCode is a refusal as "code: field: message".
func errCode(err error) string {
	if r, ok := vocab.As(err); ok {
		return fmt.Sprintf("%s: %v", r.Code, err)
	}
	return fmt.Sprint(err)
}

func TestDecidePolicy(t *testing.T) {
	members := []Member{{ID: 1}, {ID: 2}, {ID: 3}}
	st := metaState{Members: members}
	for i, tc := range []struct {
		c    MetaCommand
		want string
	}{
		{MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.AddLearner, Node: 3}, TS: 1}, "decision 1 in-flight"},
		{MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Remove, Node: 1}, TS: 2}, "DecisionInFlight: group: group 2 has decision 1 in flight"},
		{MetaCommand{Op: OpDecide, Decision: &Decision{Group: 3, Op: placement.Remove, Node: 1}, TS: 2}, "decision 2 in-flight"},
		{MetaCommand{Op: OpDecided, Decision: &Decision{ID: 1, State: "maybe"}}, `invalid: decision.state: "maybe" is not an end (done, failed, abandoned)`},
		{MetaCommand{Op: OpDecided, Decision: &Decision{ID: 1, State: DecisionDone}, TS: 3}, "decision 1 done"},
		{MetaCommand{Op: OpDecided, Decision: &Decision{ID: 1, State: DecisionFailed}, TS: 4}, "decision 1 done"},
		{MetaCommand{Op: OpDecided, Decision: &Decision{ID: 7, State: DecisionDone}}, "not_found: decision: no decision 7"},
		{MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Promote, Node: 3}, TS: 5}, "decision 3 in-flight"},
		{MetaCommand{Op: OpGroupConf, Group: 2, GroupConf: &GroupConf{Voters: []uint64{1, 2, 3}, Epoch: 9}}, "group 2 at epoch 9"},
		{MetaCommand{Op: OpGroupConf, Group: 2, GroupConf: &GroupConf{Voters: []uint64{1, 2}, Epoch: 7}}, "group 2 at epoch 9"},
		{MetaCommand{Op: OpDrain, ID: 9}, "not_found: node: node 9 is not a member"},
		{MetaCommand{Op: OpDrain, ID: 3}, "draining [3]"},
		{MetaCommand{Op: OpMemberRemove, ID: 3}, "draining []"},
	} {
		next, out := decideMeta(st, tc.c, 8)
		var got string
		switch {
		case out.Err != nil:
			got = errCode(out.Err)
		case tc.c.Op == OpDecide || tc.c.Op == OpDecided:
			d := out.Value.(Decision)
			got = fmt.Sprintf("decision %d %s", d.ID, d.State)
		case tc.c.Op == OpGroupConf:
			got = fmt.Sprintf("group 2 at epoch %d", next.Policy.Groups[2].Epoch)
		default:
			got = fmt.Sprintf("draining %v", next.Policy.Draining)
		}
		if got != tc.want {
			t.Errorf("step %d:\n got  %s\n want %s", i, got, tc.want)
		}
		st = next
	}
}
