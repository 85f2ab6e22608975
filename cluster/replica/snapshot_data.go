package replica

// A data group's snapshot, chunked: its manifest (one frame) names two
// entries whatever the group holds — its state (the used uploads, fences,
// moving sessions, receipts, content records, and its sessions with their
// logs' lengths, as JSON) and its sessions' logs, one after another in the
// state's order — then its objects and staged uploads as before. So no
// frame carries the group's session list, and a group with more sessions
// than fit in a frame's names is snapshotted and installed. The body is
// written later (the logs are read then, up to the lengths the state
// names, as before); the state is encoded when the manifest is taken and
// kept with it (the last few, by group and applied index) until then. A
// snapshot of the previous release (one "log" entry per session, the
// state inline) is still installed.

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/zeebo/blake3"

	"tally/cluster/node"
)

// Manifest entry kinds of a data group's chunked snapshot. Sent between
// nodes: do not rename.
const (
	kindGroupState  = "state" // name: the state's digest; bytes: its JSON
	kindSessionLogs = "logs"  // bytes: the state's sessions' logs, in order
)

// stateDigestContext is the BLAKE3 context of a group state's digest.
const stateDigestContext = "tally 2026-12 cluster group state v1"

// SessionLength is a session's log and its length in a snapshot.
type SessionLength struct {
	Name   string `json:"name"` // tenant/session
	Length uint64 `json:"length"`
}

// keptState is a data group snapshot's encoded state and sessions, kept
// for writing its body.
type keptState struct {
	index    uint64
	state    []byte
	sessions []SessionLength
}

// keptStates are the data groups' last snapshots' states, by group.
type keptStates struct {
	mu sync.Mutex
	by map[uint64][]keptState
}

func (k *keptStates) keep(group uint64, s keptState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[uint64][]keptState{}
	}
	list := slices.DeleteFunc(k.by[group], func(o keptState) bool { return o.index == s.index })
	list = append(list, s)
	if len(list) > snapshotsKept {
		list = slices.Delete(list, 0, len(list)-snapshotsKept)
	}
	k.by[group] = list
}

func (k *keptStates) find(group, index uint64) (keptState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.by[group] {
		if s.index == index {
			return s, true
		}
	}
	return keptState{}, false
}

// chunkedSnapshot is a data group's snapshot head (its applied index) and
// entries: its state, its logs, its bytes.
func (m *dataSM) chunkedSnapshot(group uint64) (snapshotHead, []node.ManifestEntry, error) {
	st, logs, err := m.snapshot(group)
	if err != nil {
		return snapshotHead{}, nil, err
	}
	var bytes []node.ManifestEntry
	var total uint64
	for _, e := range logs {
		if e.Kind != kindSessionLog {
			bytes = append(bytes, e)
			continue
		}
		st.Sessions = append(st.Sessions, SessionLength{Name: e.Name, Length: e.Length})
		total += e.Length
	}
	state, err := json.Marshal(st)
	if err != nil {
		return snapshotHead{}, nil, err
	}
	m.kept.keep(group, keptState{index: st.Applied.Index, state: state, sessions: st.Sessions})
	entries := append([]node.ManifestEntry{
		{Kind: kindGroupState, Name: stateDigest(state), Length: uint64(len(state))},
		{Kind: kindSessionLogs, Name: "sessions", Length: total},
	}, bytes...)
	return snapshotHead{Applied: st.Applied}, entries, nil
}

func stateDigest(state []byte) string {
	h := blake3.NewDeriveKey(stateDigestContext)
	h.Write(state)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// chunkedState reports a manifest whose state is in its body.
func chunkedState(man node.Manifest) bool {
	return slices.ContainsFunc(man.Entries, func(e node.ManifestEntry) bool { return e.Kind == kindGroupState })
}

// keptState is the state a chunked manifest of group was taken with: the
// one kept at its applied index, whose digest its state entry names.
func (m *dataSM) keptState(group uint64, man node.Manifest) (keptState, error) {
	i := slices.IndexFunc(man.Entries, func(e node.ManifestEntry) bool { return e.Kind == kindGroupState })
	if i < 0 {
		return keptState{}, nil // the previous release's form: nothing kept
	}
	var head snapshotHead
	if err := json.Unmarshal(man.Inline, &head); err != nil {
		return keptState{}, fmt.Errorf("head: %w", err)
	}
	k, ok := m.kept.find(group, head.Applied.Index)
	if !ok || stateDigest(k.state) != man.Entries[i].Name {
		return keptState{}, fmt.Errorf("the state of the snapshot at %d is no longer kept (newer snapshots were taken)", head.Applied.Index)
	}
	return k, nil
}

// readGroupState reads a group's state from its body entry, checking its
// digest.
func readGroupState(e node.ManifestEntry, r io.Reader) (snapshotHead, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return snapshotHead{}, err
	}
	if got := stateDigest(b); got != e.Name {
		return snapshotHead{}, fmt.Errorf("state digest %s, the manifest says %s", got, e.Name)
	}
	var st snapshotHead
	if err := json.Unmarshal(b, &st); err != nil {
		return snapshotHead{}, fmt.Errorf("state: %w", err)
	}
	return st, nil
}

// readSessionLogs reads the logs entry: each of sessions' logs in turn,
// handed to write with a reader of exactly its length.
func readSessionLogs(sessions []SessionLength, e node.ManifestEntry, r io.Reader, write func(name string, r io.Reader, n uint64) error) error {
	var total uint64
	for _, s := range sessions {
		total += s.Length
	}
	if total != e.Length {
		return fmt.Errorf("the state's logs hold %d bytes, the manifest says %d", total, e.Length)
	}
	for _, s := range sessions {
		lr := &io.LimitedReader{R: r, N: int64(s.Length)}
		if err := write(s.Name, lr, s.Length); err != nil {
			return fmt.Errorf("session %s: %w", s.Name, err)
		}
		if lr.N != 0 {
			return fmt.Errorf("session %s: %d of its %d bytes read", s.Name, int64(s.Length)-lr.N, s.Length)
		}
	}
	return nil
}
