package replica

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"tally/cluster/node"
	"tally/refuse"
)

// decideLiveness is the meta group's one rule for liveness facts: every
// transition it takes and every one it refuses, with its words.
func TestDecideLiveness(t *testing.T) {
	members := []Member{{ID: 1}, {ID: 2}, {ID: 3}}
	fact := func(node, inc uint64, state, source string) *LivenessFact {
		return &LivenessFact{Node: node, Incarnation: inc, State: state, Source: source}
	}
	held := []LivenessFact{*fact(1, 4, LivenessAlive, LivenessDetector), *fact(3, 2, LivenessDead, LivenessDetector)}
	for _, c := range []struct {
		name string
		f    *LivenessFact
		want string // the error, or the facts after
	}{
		{"missing", nil, "invalid liveness: required"},
		{"a bad state", fact(1, 5, "suspect", LivenessDetector), `invalid liveness.state: "suspect": must be alive or dead`},
		{"a bad source", fact(1, 5, LivenessDead, "rumour"), `invalid liveness.source: "rumour": must be operator or detector`},
		{"not a member", fact(9, 1, LivenessDead, LivenessOperator), "not_found node-id: node 9 is not a member"},
		{"a first fact", fact(2, 0, LivenessDead, LivenessOperator), "[1:4:alive 2:0:dead 3:2:dead]"},
		{"stale", fact(1, 3, LivenessDead, LivenessDetector), "conflict incarnation: 3 is stale: node 1 is recorded alive at incarnation 4, and an incarnation never goes backwards"},
		{"the same again", fact(1, 4, LivenessAlive, LivenessDetector), "[1:4:alive 3:2:dead]"},
		{"alive to dead at the same incarnation", fact(1, 4, LivenessDead, LivenessOperator), "[1:4:dead 3:2:dead]"},
		{"dead to alive at the same incarnation", fact(3, 2, LivenessAlive, LivenessDetector), "conflict incarnation: node 3 is recorded dead at incarnation 2: a dead node comes back only with a higher incarnation"},
		{"dead again", fact(3, 2, LivenessDead, LivenessOperator), "[1:4:alive 3:2:dead]"},
		{"alive at a higher incarnation", fact(3, 3, LivenessAlive, LivenessDetector), "[1:4:alive 3:3:alive]"},
		{"dead at a higher incarnation", fact(1, 9, LivenessDead, LivenessDetector), "[1:9:dead 3:2:dead]"},
	} {
		got, out := decideLiveness(held, members, MetaCommand{Op: OpLiveness, Liveness: c.f})
		var s string
		if out.Err != nil {
			r, _ := refuse.As(out.Err)
			s = fmt.Sprintf("%s %s: %s", r.Code, r.Field, r.Rule)
			if len(got) != len(held) || got[0] != held[0] || got[1] != held[1] {
				t.Errorf("%s: a refusal changed the facts: %v", c.name, got)
			}
		} else {
			s = "["
			for i, f := range got {
				if i > 0 {
					s += " "
				}
				s += fmt.Sprintf("%d:%d:%s", f.Node, f.Incarnation, f.State)
			}
			s += "]"
		}
		if s != c.want {
			t.Errorf("%s: %s, want %s", c.name, s, c.want)
		}
	}
	if held[0].State != LivenessAlive || held[0].Incarnation != 4 {
		t.Fatalf("decideLiveness changed its input: %v", held)
	}
}

// Liveness facts are applied, kept over a restart and carried by the meta
// group's snapshot.
func TestMetaLivenessAppliedAndSnapshotted(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpMemberAdd, Member: &Member{ID: 1, RaftAddr: "a:1", Addr: "a:2"}}),
		metaEntry(t, 2, MetaCommand{Op: OpMemberAdd, Member: &Member{ID: 2, RaftAddr: "b:1", Addr: "b:2"}}),
		metaEntry(t, 3, MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 2, Incarnation: 3, State: LivenessDead, Source: LivenessDetector, Reason: "suspected 9s", TS: 5}}),
		metaEntry(t, 4, MetaCommand{Op: OpLiveness, Liveness: &LivenessFact{Node: 2, Incarnation: 2, State: LivenessAlive, Source: LivenessDetector}}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	if out, _ := sm.Take(node.MetaGroup, 4); out.Err == nil {
		t.Fatal("a stale fact was taken")
	}
	want := LivenessFact{Node: 2, Incarnation: 3, State: LivenessDead, Source: LivenessDetector, Reason: "suspected 9s", TS: 5}
	if f, ok := sm.Liveness(2); !ok || f != want {
		t.Fatalf("fact: %+v %v", f, ok)
	}
	if _, ok := sm.Liveness(1); ok {
		t.Fatal("a fact for node 1")
	}
	idx, man, err := sm.Snapshot(node.MetaGroup)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := sm.WriteSnapshot(node.MetaGroup, man, &body); err != nil {
		t.Fatal(err)
	}
	other, _ := openReplica(t, filepath.Join(dir, "other"), "")
	if err := other.Restore(node.MetaGroup, idx, man, &body); err != nil {
		t.Fatal(err)
	}
	if f, ok := other.Liveness(2); !ok || f != want {
		t.Fatalf("restored: %+v %v", f, ok)
	}
	sm.Close()
	db.Close()
	again, _ := openReplica(t, dir, "")
	if f, ok := again.Liveness(2); !ok || f != want || len(again.LivenessFacts()) != 1 {
		t.Fatalf("after a restart: %+v %v", f, ok)
	}
}
