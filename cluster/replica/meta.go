package replica

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"tally/auth"
	"tally/cluster/node"
	"tally/refuse"
)

// metaState is the meta group's state: the members, by id, and the
// cluster's tokens, by id, each stored whole (they are small); the
// directory's placements and epochs, by tenant/session, one key each,
// held in ranges (directory.go, directory_ranges.go).
type metaState struct {
	Members []Member     `json:"members"`
	Tokens  []TokenEntry `json:"tokens,omitempty"`
	Nonces  []NonceEntry `json:"-"`
	// Dir is the directory: each session's recorded group and epoch.
	Dir    *Directory `json:"-"`
	Policy Policy     `json:"-"`
	// Liveness are the committed liveness facts, by node (liveness.go).
	Liveness []LivenessFact `json:"liveness,omitempty"`
	// Moves are the moves (move.go).
	Moves []Move `json:"-"`
	// Added are the data groups added after the bootstrap
	// (directory_groups.go).
	Added []AddedGroup `json:"-"`
}

// TokenEntry is one of the cluster's tokens: its record (the hash of its
// secret, never the secret) and whether it was revoked.
type TokenEntry struct {
	auth.Record
	Revoked   bool      `json:"revoked,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// metaSM is the meta group's state machine: the members, the cluster's
// tokens, the operator requests' nonces and the directory's placements,
// decided by one pure rule per operation (decideMeta).
type metaSM struct {
	base

	mu      sync.Mutex
	members []Member
	// The cluster's tokens as applied: the entries (the meta group's
	// state) and the table that authenticates them.
	tokenList []TokenEntry
	tokens    *auth.Table
	// nonces are the operator requests' nonces the meta group recorded
	// and has not yet let expire.
	nonces []NonceEntry
	// dir is the directory as applied (tenant/session → group and epoch;
	// directory.go): immutable, replaced whole by each batch.
	dir *Directory
	// policy is the placement policy (policy.go).
	policy   Policy
	liveness []LivenessFact
	// moves are the moves (move.go).
	moves []Move
	// snaps are the directories of the snapshots last taken, by applied
	// index, for writing their bodies (snapshot_meta.go).
	snaps    []keptDirectory
	added    []AddedGroup       // data groups added after the bootstrap
	outcomes map[uint64]Outcome // index → outcome of the last batch
}

// newMeta opens the meta group's state.
func newMeta(b base) (*metaSM, error) {
	m := &metaSM{base: b}
	st, err := m.loadMeta()
	if err != nil {
		return nil, err
	}
	if m.tokens, err = tokenTable(st.Tokens); err != nil {
		return nil, err
	}
	m.members, m.tokenList, m.nonces, m.policy, m.liveness = st.Members, st.Tokens, st.Nonces, st.Policy, st.Liveness
	epochs, moves, err := m.loadMoves()
	if err != nil {
		return nil, err
	}
	m.moves = moves
	if m.dir, err = m.loadDirectory(epochs); err != nil {
		return nil, err
	}
	if m.added, err = m.loadAdded(); err != nil {
		return nil, err
	}
	return m, nil
}

// applied is the meta group's durable applied index.
func (m *metaSM) applied() (uint64, error) {
	a, err := m.restored(node.MetaGroup)
	return a.Index, err
}

// take hands over the outcome of the meta group's entry applied in its
// last batch, once.
func (m *metaSM) take(index uint64) (Outcome, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.outcomes[index]
	if ok {
		delete(m.outcomes, index)
	}
	return o, ok
}

// loadMeta reads the meta group's state: the members under their key, the
// tokens under theirs.
func (m *metaSM) loadMeta() (metaState, error) {
	var st metaState
	if _, err := m.get(gkey(node.MetaGroup, kindMembers), &st); err != nil {
		return metaState{}, err
	}
	var toks []TokenEntry
	if _, err := m.get(gkey(node.MetaGroup, kindTokens), &toks); err != nil {
		return metaState{}, err
	}
	st.Tokens = toks
	if _, err := m.get(gkey(node.MetaGroup, kindNonces), &st.Nonces); err != nil {
		return metaState{}, err
	}
	if _, err := m.get(gkey(node.MetaGroup, kindPolicy), &st.Policy); err != nil {
		return metaState{}, err
	}
	return st, nil
}

// metaSnapshot is the meta group's state as applied, for a snapshot.
func (m *metaSM) metaSnapshot() metaState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return metaState{Members: slices.Clone(m.members), Tokens: slices.Clone(m.tokenList), Nonces: slices.Clone(m.nonces), Dir: m.dir, Policy: m.policy, Liveness: slices.Clone(m.liveness),
		Moves: slices.Clone(m.moves), Added: slices.Clone(m.added)}
}

// saveMeta writes the meta group's state and its applied record in one
// synced batch, and then makes it the replica's.
// A restore replaces the directory's keys whole.
func (m *metaSM) saveMeta(st metaState, a applied, outs map[uint64]Outcome, restore bool) error {
	m.mu.Lock()
	old, oldAdded := m.dir, m.added
	m.mu.Unlock()
	err := m.commit(func(b *pebble.Batch) error {
		if restore {
			if err := clearDirectory(b); err != nil {
				return err
			}
			old = nil
		}
		if err := writeDirectory(b, old, st.Dir); err != nil {
			return err
		}
		if err := writeMoves(b, nil, nil, nil, st.Moves); err != nil {
			return err
		}
		if err := writeAdded(b, oldAdded, st.Added); err != nil {
			return err
		}
		if err := setJSON(b, gkey(node.MetaGroup, kindMembers), metaState{Members: st.Members, Liveness: st.Liveness}); err != nil {
			return err
		}
		if err := setJSON(b, gkey(node.MetaGroup, kindTokens), st.Tokens); err != nil {
			return err
		}
		if err := setJSON(b, gkey(node.MetaGroup, kindNonces), st.Nonces); err != nil {
			return err
		}
		if err := setJSON(b, gkey(node.MetaGroup, kindPolicy), st.Policy); err != nil {
			return err
		}
		return setJSON(b, gkey(node.MetaGroup, kindApplied), a)
	}, true)
	if err != nil {
		return fmt.Errorf("replica: meta group: %w", err)
	}
	table, err := tokenTable(st.Tokens)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.members, m.tokenList, m.tokens, m.nonces = st.Members, st.Tokens, table, st.Nonces
	m.dir, m.policy, m.liveness = st.Dir, st.Policy, st.Liveness
	m.moves, m.added = st.Moves, st.Added
	if outs != nil {
		m.outcomes = outs
	}
	m.mu.Unlock()
	return nil
}

// tokenTable is the table authenticating the entries.
func tokenTable(entries []TokenEntry) (*auth.Table, error) {
	t := auth.NewTable()
	for _, e := range entries {
		if err := t.Add(e.Record); err != nil {
			return nil, fmt.Errorf("replica: meta group: %w", err)
		}
		if e.Revoked {
			t.Revoke(e.ID)
		}
	}
	return t, nil
}

// Tokens is the cluster's token table as this replica has applied it.
func (m *metaSM) Tokens() *auth.Table {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens
}

// TokenEntries are the cluster's tokens as this replica has applied them,
// in the order the meta group created them: their records (hashes, never
// secrets) and revocations, for comparing replicas.
func (m *metaSM) TokenEntries() []TokenEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.tokenList)
}

// Members is the membership as this replica has applied it, by id.
func (m *metaSM) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Member looks a member up by id.
func (m *metaSM) Member(id uint64) (Member, bool) {
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
	CodeDuplicateNode refuse.Code = "DuplicateNode"
)

// apply applies the meta group's entries and their index in one synced
// batch, so it is exactly once by construction.
func (m *metaSM) apply(ents []node.Entry) ([][]byte, error) {
	a, err := m.progress(node.MetaGroup)
	if err != nil {
		return nil, err
	}
	st := m.metaSnapshot()
	outs := make(map[uint64]Outcome, len(ents))
	changed := false
	for _, e := range ents {
		a.Epoch = nextEpoch(a.Epoch, e)
		if e.Kind != node.KindCommand {
			continue
		}
		var c MetaCommand
		if err := json.Unmarshal(e.Data, &c); err != nil {
			outs[e.Index] = Outcome{Err: refuse.Invalidf("command", "entry is not a meta command")}
			continue
		}
		var out Outcome
		st, out = decideMeta(st, c, m.cfg.Groups)
		changed = changed || (out.Err == nil && strings.HasPrefix(c.Op, "member."))
		outs[e.Index] = out
	}
	a.Index = ents[len(ents)-1].Index
	if err := m.saveMeta(st, a, outs, false); err != nil {
		return nil, err
	}
	if changed && m.cfg.OnMembers != nil {
		m.cfg.OnMembers(slices.Clone(st.Members))
	}
	return make([][]byte, len(ents)), nil
}

// decideMeta is the meta group's one rule per operation: pure, so every
// replica decides the same. groups is the cluster's data groups.
func decideMeta(st metaState, c MetaCommand, groups int) (metaState, Outcome) {
	switch c.Op {
	case OpTokenCreate, OpTokenRevoke:
		toks, out := decideToken(st.Tokens, c)
		st.Tokens = toks
		return st, out
	case OpPlacementSet:
		dir, out := decidePlacementIn(st.Dir, groups, groups+len(st.Added), c.Placement)
		st.Dir = dir
		return st, out
	case OpMoveBegin, OpMoveStep:
		d, out := decideMove(directory{dir: st.Dir, moves: st.Moves, added: len(st.Added)}, c, groups)
		st.Dir, st.Moves = d.result(), d.moves
		return st, out
	case OpGroupsAdd:
		added, out := decideGroupsAdd(st.Added, groups, st.Members, c)
		st.Added = added
		return st, out
	case OpNonceUse:
		ns, out := decideNonce(st.Nonces, c)
		st.Nonces = ns
		return st, out
	case OpLiveness:
		facts, out := decideLiveness(st.Liveness, st.Members, c)
		st.Liveness = facts
		return st, out
	case OpDrain:
		p, out := decideDrain(st.Policy, st.Members, c)
		st.Policy = p
		return st, out
	case OpConstrain:
		p, out := decideConstrain(st, c, groups)
		st.Policy = p
		return st, out
	case OpCustody:
		p, out := decideCustody(st.Policy, c)
		st.Policy = p
		return st, out
	case OpConfigure, OpDecide, OpDecided, OpGroupConf:
		p, out := decidePolicy(st.Policy, c)
		st.Policy = p
		return st, out
	}
	members, out := decideMember(st.Members, c)
	st.Members = members
	if c.Op == OpMemberRemove && out.Err == nil && slices.Contains(st.Policy.Draining, c.ID) {
		// A removed node's drain is over.
		st.Policy = st.Policy.clone()
		st.Policy.Draining = slices.DeleteFunc(st.Policy.Draining, func(id uint64) bool { return id == c.ID })
	}
	return st, out
}

// decideToken creates or revokes a token. A create retried with the same
// record answers as the first; a revocation of a revoked token answers it
// again.
func decideToken(toks []TokenEntry, c MetaCommand) ([]TokenEntry, Outcome) {
	switch c.Op {
	case OpTokenCreate:
		if c.Token == nil || c.Token.ID == "" {
			return toks, Outcome{Err: refuse.Invalidf("token", "required, with an id")}
		}
		if err := auth.Check(c.Token.Tenant, c.Token.Participant, c.Token.Role); err != nil {
			return toks, Outcome{Err: err}
		}
		for _, t := range toks {
			if t.ID == c.Token.ID || t.Hash == c.Token.Hash {
				if t.Record == *c.Token {
					return toks, Outcome{Value: t}
				}
				return toks, Outcome{Err: refuse.Conflictf("token", fmt.Sprintf("token %s already exists", t.ID))}
			}
		}
		e := TokenEntry{Record: *c.Token}
		return append(slices.Clone(toks), e), Outcome{Value: e}
	default: // OpTokenRevoke
		i := slices.IndexFunc(toks, func(t TokenEntry) bool { return t.ID == c.TokenID })
		if i < 0 {
			return toks, Outcome{Err: refuse.NotFoundf("id", fmt.Sprintf("no token %s", c.TokenID))}
		}
		if toks[i].Revoked {
			return toks, Outcome{Value: toks[i]}
		}
		out := slices.Clone(toks)
		out[i].Revoked, out[i].RevokedAt = true, time.Unix(0, c.TS).UTC()
		return out, Outcome{Value: out[i]}
	}
}

// decideMember adds or removes a member.
func decideMember(members []Member, c MetaCommand) ([]Member, Outcome) {
	switch c.Op {
	case OpMemberAdd:
		if c.Member == nil || c.Member.ID == 0 {
			return members, Outcome{Err: refuse.Invalidf("member", "required, with a node id other than 0")}
		}
		for _, mb := range members {
			if mb.ID == c.Member.ID {
				if mb == *c.Member {
					return members, Outcome{Value: mb} // a retried join
				}
				return members, Outcome{Err: refuse.New(CodeDuplicateNode, "node-id", fmt.Sprintf("node %d is already a member, at raft address %s, address %s, zone %q: it joins as the member recorded", mb.ID, mb.RaftAddr, mb.Addr, mb.Zone))}
			}
			if mb.RaftAddr == c.Member.RaftAddr || mb.Addr == c.Member.Addr {
				return members, Outcome{Err: refuse.New(CodeDuplicateNode, "raft-addr", fmt.Sprintf("node %d already uses address %s or %s", mb.ID, mb.RaftAddr, mb.Addr))}
			}
		}
		out := append(slices.Clone(members), *c.Member)
		slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
		return out, Outcome{Value: *c.Member}
	case OpMemberRemove:
		i := slices.IndexFunc(members, func(mb Member) bool { return mb.ID == c.ID })
		if i < 0 {
			return members, Outcome{Err: refuse.NotFoundf("node-id", fmt.Sprintf("node %d is not a member", c.ID))}
		}
		if len(members) == 1 {
			return members, Outcome{Err: refuse.Conflictf("node-id", fmt.Sprintf("node %d is the last member", c.ID))}
		}
		return slices.Delete(slices.Clone(members), i, i+1), Outcome{}
	}
	return members, Outcome{Err: refuse.Invalidf("op", fmt.Sprintf("%q is not a meta operation", c.Op))}
}

// NonceEntry is a signed operator request's nonce as the meta group
// records it, and the instant (Unix nanoseconds) from which it may be
// forgotten: its signature cannot pass at any node by then. Stored: do not
// rename.
type NonceEntry struct {
	Nonce   string `json:"nonce"`
	Expires int64  `json:"expires"`
	// By is the proposer's token for the node's one taking of the request:
	// a nonce.use it proposes again (its outcome lost to a leader change)
	// is answered as the first, another's is a replay.
	By string `json:"by,omitempty"`
}

// NoncesMax bounds the nonces the meta group holds at once (each for
// twice a signature's lifetime): past it a request is refused until some
// expire.
const NoncesMax = 4096

// Refusals of nonce.use.
const (
	// CodeReplayed: the nonce was used already, by a request taken at
	// this node or another: the request is a replay.
	CodeReplayed refuse.Code = "Replayed"
	// CodeTooManySigned: NoncesMax nonces are held and none has expired.
	CodeTooManySigned refuse.Code = "TooManySignedRequests"
)

// decideNonce records a nonce unless it is held already. Nonces whose
// expiry is at or before the command's instant (its proposer's clock, so
// every replica forgets the same ones at the same entry) are dropped
// first.
func decideNonce(ns []NonceEntry, c MetaCommand) ([]NonceEntry, Outcome) {
	if c.Nonce == nil || c.Nonce.Nonce == "" {
		return ns, Outcome{Err: refuse.Invalidf("nonce", "required")}
	}
	kept := make([]NonceEntry, 0, len(ns)+1)
	for _, n := range ns {
		if n.Expires > c.TS {
			kept = append(kept, n)
		}
	}
	for _, n := range kept {
		if n.Nonce == c.Nonce.Nonce && n.By != "" && n.By == c.Nonce.By {
			return kept, Outcome{}
		}
		if n.Nonce == c.Nonce.Nonce {
			return kept, Outcome{Err: refuse.New(CodeReplayed, "nonce", fmt.Sprintf("%s was used already, at this node or another: a signed request is good once (sign a new one)", n.Nonce))}
		}
	}
	if len(kept) >= NoncesMax {
		return kept, Outcome{Err: refuse.New(CodeTooManySigned, "nonce", fmt.Sprintf("%d signed requests are remembered, the most the cluster holds: retry once some have expired (within minutes)", len(kept)))}
	}
	return append(kept, *c.Nonce), Outcome{}
}
