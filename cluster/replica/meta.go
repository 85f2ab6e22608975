package replica

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/vocab"
)

// metaState is the meta group's state, stored whole (it is small): the
// members, by id.
type metaState struct {
	Members []Member `json:"members"`
}

func (m *SM) loadMembers() ([]Member, error) {
	var st metaState
	_, err := m.get(gkey(node.MetaGroup, kindMembers), &st)
	return st.Members, err
}

// Members is the membership as this replica has applied it, by id.
func (m *SM) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Member looks a member up by id.
func (m *SM) Member(id uint64) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mb := range m.members {
		if mb.ID == id {
			return mb, true
		}
	}
	return Member{}, false
}

// Refusals of membership commands, decided in the meta group.
const (
	CodeDuplicateNode vocab.Code = "DuplicateNode"
)

// applyMeta applies the meta group's entries and their index in one synced
// batch, so it is exactly once by construction.
func (m *SM) applyMeta(ents []node.Entry) ([][]byte, error) {
	a, err := m.progress(node.MetaGroup)
	if err != nil {
		return nil, err
	}
	members := m.Members()
	outs := make(map[uint64]Outcome, len(ents))
	changed := false
	for _, e := range ents {
		if e.Kind != node.KindCommand {
			continue
		}
		var c MetaCommand
		if err := json.Unmarshal(e.Data, &c); err != nil {
			outs[e.Index] = Outcome{Err: vocab.Invalidf("command", "entry is not a meta command")}
			continue
		}
		var out Outcome
		members, out = decideMeta(members, c)
		changed = changed || out.Err == nil
		outs[e.Index] = out
	}
	a.Index = ents[len(ents)-1].Index
	err = m.commit(func(b *pebble.Batch) error {
		if err := setJSON(b, gkey(node.MetaGroup, kindMembers), metaState{Members: members}); err != nil {
			return err
		}
		return setJSON(b, gkey(node.MetaGroup, kindApplied), a)
	}, true)
	if err != nil {
		return nil, fmt.Errorf("replica: meta group: %w", err)
	}
	m.mu.Lock()
	m.members = members
	m.outcomes[node.MetaGroup] = outs
	m.mu.Unlock()
	if changed && m.cfg.OnMembers != nil {
		m.cfg.OnMembers(slices.Clone(members))
	}
	return make([][]byte, len(ents)), nil
}

// decideMeta is the meta group's one rule per operation: pure, so every
// replica decides the same.
func decideMeta(members []Member, c MetaCommand) ([]Member, Outcome) {
	switch c.Op {
	case OpMemberAdd:
		if c.Member == nil || c.Member.ID == 0 {
			return members, Outcome{Err: vocab.Invalidf("member", "required, with a node id other than 0")}
		}
		for _, mb := range members {
			if mb.ID == c.Member.ID {
				if mb == *c.Member {
					return members, Outcome{Value: mb} // a retried join
				}
				return members, Outcome{Err: vocab.New(CodeDuplicateNode, "node-id", fmt.Sprintf("node %d is already a member, at raft address %s", mb.ID, mb.RaftAddr))}
			}
			if mb.RaftAddr == c.Member.RaftAddr || mb.Addr == c.Member.Addr {
				return members, Outcome{Err: vocab.New(CodeDuplicateNode, "raft-addr", fmt.Sprintf("node %d already uses address %s or %s", mb.ID, mb.RaftAddr, mb.Addr))}
			}
		}
		out := append(slices.Clone(members), *c.Member)
		slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
		return out, Outcome{Value: *c.Member}
	case OpMemberRemove:
		i := slices.IndexFunc(members, func(mb Member) bool { return mb.ID == c.ID })
		if i < 0 {
			return members, Outcome{Err: vocab.NotFoundf("node-id", fmt.Sprintf("node %d is not a member", c.ID))}
		}
		if len(members) == 1 {
			return members, Outcome{Err: vocab.Conflictf("node-id", fmt.Sprintf("node %d is the last member", c.ID))}
		}
		return slices.Delete(slices.Clone(members), i, i+1), Outcome{}
	}
	return members, Outcome{Err: vocab.Invalidf("op", fmt.Sprintf("%q is not a meta operation", c.Op))}
}
