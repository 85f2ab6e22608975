package replica

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tally/store"
)

// base is what both state machines have: the replica's configuration and
// the keys they keep beside the raft log, below.
type base struct {
	cfg Config
	log *slog.Logger
}

// Keys beside the raft log, under prefix 'T': per group the applied index
// (with the last instant applied), the intent of the batch under way, and
// the meta group's membership.
const prefix = 'T'

func gkey(group uint64, kind byte) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefix}, group)
	return append(k, kind)
}

const (
	kindApplied   = 'a'
	kindIntent    = 'i'
	kindRestoring = 'r'
	kindMembers   = 'm'
	kindTokens    = 't'
	kindNonces    = 'n'
)

// applied is a group's durable progress: its last applied index and the
// latest instant a command of it was applied at (the floor of the next).
type applied struct {
	Index uint64 `json:"index"`
	TS    int64  `json:"ts"`
	// Epoch is the group's placement epoch: the index of the last
	// configuration change applied in it, 0 before any (epoch.go).
	Epoch uint64 `json:"epoch,omitempty"`
}

// intent is a batch under way: its range and where each session it
// touches stood before it.
type intent struct {
	First, Last uint64
	Sessions    map[string]store.Position
}

func (m *base) get(key []byte, v any) (bool, error) {
	b, closer, err := m.cfg.DB.Pebble().Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("replica: key %x: %w", key, err)
	}
	return true, nil
}

func setJSON(b *pebble.Batch, key []byte, v any) error {
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set(key, enc, nil)
}

func (m *base) commit(f func(b *pebble.Batch) error, sync bool) error {
	b := m.cfg.DB.Pebble().NewBatch()
	defer b.Close()
	if err := f(b); err != nil {
		return err
	}
	return m.cfg.DB.Commit(b, sync)
}

func (m *base) progress(group uint64) (applied, error) {
	var a applied
	_, err := m.get(gkey(group, kindApplied), &a)
	return a, err
}

// restored is the group's durable progress, refused if a snapshot's
// install was interrupted.
func (m *base) restored(group uint64) (applied, error) {
	var restoring applied
	if ok, err := m.get(gkey(group, kindRestoring), &restoring); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("replica: group %d: a snapshot install (index %d) was interrupted: the node's data is partial; remove its data directory and join it again", group, restoring.Index)
		}
		return applied{}, err
	}
	return m.progress(group)
}

// scan calls f with the name and value of each key under prefix (a
// group's key kind).
func (m *base) scan(prefix []byte, f func(name string, value []byte) error) error {
	upper := slices.Clone(prefix)
	upper[len(upper)-1]++
	it, err := m.cfg.DB.Pebble().NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := f(string(it.Key()[len(prefix):]), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// scanGroups reads the sessions' records of a kind under prefix: each
// one's group.
func (m *base) scanGroups(prefix []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := m.scan(prefix, func(name string, v []byte) error {
		var r groupRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("replica: record of %q: %w", name, err)
		}
		out[name] = r.Group
		return nil
	})
	return out, err
}
