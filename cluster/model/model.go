// Package model is a small replicated state machine for testing the cluster
// engine: per-session append-only logs, each record hash-chained to the one
// before it with BLAKE3, so replicas can be compared by their chain heads.
// Requests are deduplicated per client (the last request's outcome is kept,
// as the ledger keeps its idempotency records), so a retried append returns
// the recorded sequence instead of appending twice.
//
// Its state lives in the node's raftlog database under prefix 'm', and each
// Apply is one synced batch holding the records and the applied index.
//
// The package also holds the models client histories are checked against
// with porcupine: Linear, for appends to per-session lists, and Ledger,
// for promises declared, resolved and listed in a session of tally's
// ledger (what the simulator's clients do through the real replica).
package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/zeebo/blake3"

	"tally/cluster/node"
	"tally/cluster/raftlog"
)

// Command is one append.
type Command struct {
	Session string `json:"session"`
	Client  uint64 `json:"client"`
	Req     uint64 `json:"req"` // the client's request number, increasing
	Value   string `json:"value"`
}

// Result is an append's outcome.
type Result struct {
	Seq  uint64 `json:"seq"`           // the record's sequence in its session
	Hash []byte `json:"hash"`          // the chain hash through the record
	Err  string `json:"err,omitempty"` // a refusal, decided identically everywhere
	Dup  bool   `json:"dup,omitempty"` // a retry answered from the recorded outcome
}

// Record is one entry of a session's log.
type Record struct {
	Seq   uint64
	Value string
	Hash  []byte
}

// SM is the state machine. It implements node.StateMachine.
type SM struct {
	db *raftlog.DB
}

var _ node.StateMachine = (*SM)(nil)

// New returns the state machine over a node's store.
func New(db *raftlog.DB) *SM { return &SM{db: db} }

func gkey(group uint64, kind byte, rest ...[]byte) []byte {
	k := binary.BigEndian.AppendUint64([]byte{'m'}, group)
	k = append(k, kind)
	for _, r := range rest {
		k = append(k, r...)
	}
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func (m *SM) get(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// Applied is the group's durable applied index.
func (m *SM) Applied(group uint64) (uint64, error) {
	v, ok, err := m.get(m.db.Pebble(), gkey(group, 'a'))
	if err != nil || !ok {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

// Apply appends each command's record, or answers a retry from the
// client's recorded outcome.
func (m *SM) Apply(group uint64, ents []node.Entry) ([][]byte, error) {
	applied, err := m.Applied(group)
	if err != nil {
		return nil, err
	}
	if len(ents) == 0 {
		return nil, nil
	}
	if ents[0].Index <= applied {
		return nil, fmt.Errorf("model: group %d handed index %d, already applied through %d", group, ents[0].Index, applied)
	}
	b := m.db.Pebble().NewIndexedBatch()
	results := make([][]byte, len(ents))
	for i, e := range ents {
		if e.Kind != node.KindCommand {
			continue
		}
		res, err := m.applyOne(b, group, e.Data)
		if err != nil {
			b.Close()
			return nil, err
		}
		out, _ := json.Marshal(res)
		results[i] = out
	}
	if err := b.Set(gkey(group, 'a'), u64(ents[len(ents)-1].Index), nil); err != nil {
		b.Close()
		return nil, err
	}
	if err := m.db.Commit(b, true); err != nil {
		return nil, fmt.Errorf("model: apply group %d: %w", group, err)
	}
	return results, b.Close()
}

func (m *SM) applyOne(b *pebble.Batch, group uint64, data []byte) (Result, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return Result{Err: "malformed command: " + err.Error()}, nil
	}
	if c.Session == "" {
		return Result{Err: "session is required"}, nil
	}
	ck := gkey(group, 'c', u64(c.Client))
	v, ok, err := m.get(b, ck)
	if err != nil {
		return Result{}, err
	}
	if ok {
		last := binary.BigEndian.Uint64(v[:8])
		if c.Req == last {
			var r Result
			if err := json.Unmarshal(v[8:], &r); err != nil {
				return Result{}, err
			}
			r.Dup = true
			return r, nil
		}
		if c.Req < last {
			return Result{Err: fmt.Sprintf("request %d is older than the client's last, %d", c.Req, last)}, nil
		}
	}
	hk := gkey(group, 'h', []byte(c.Session))
	var seq uint64
	prev := make([]byte, 32)
	if v, ok, err := m.get(b, hk); err != nil {
		return Result{}, err
	} else if ok {
		seq, prev = binary.BigEndian.Uint64(v[:8]), v[8:40]
	}
	seq++
	sum := ChainHash(prev, seq, c.Value)
	rec := append(append([]byte(nil), sum...), c.Value...)
	if err := b.Set(gkey(group, 'l', []byte(c.Session), []byte{0}, u64(seq)), rec, nil); err != nil {
		return Result{}, err
	}
	if err := b.Set(hk, append(u64(seq), sum...), nil); err != nil {
		return Result{}, err
	}
	res := Result{Seq: seq, Hash: sum}
	enc, _ := json.Marshal(res)
	if err := b.Set(ck, append(u64(c.Req), enc...), nil); err != nil {
		return Result{}, err
	}
	return res, nil
}

// ChainHash is a record's hash: BLAKE3 of the previous record's hash (32
// zero bytes for the first), the record's sequence and its value.
func ChainHash(prev []byte, seq uint64, value string) []byte {
	h := blake3.New()
	h.Write(prev)
	h.Write(u64(seq))
	h.Write([]byte(value))
	return h.Sum(nil)
}

// Log returns a session's records in order.
func (m *SM) Log(group uint64, session string) ([]Record, error) {
	prefix := gkey(group, 'l', []byte(session), []byte{0})
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: gkey(group, 'l', []byte(session), []byte{1})})
	if err != nil {
		return nil, err
	}
	var out []Record
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		out = append(out, Record{
			Seq:   binary.BigEndian.Uint64(it.Key()[len(prefix):]),
			Hash:  append([]byte(nil), v[:32]...),
			Value: string(v[32:]),
		})
	}
	return out, it.Close()
}

// Snapshot streams every key of the group as length-prefixed pairs.
func (m *SM) Snapshot(group uint64, w io.Writer) (uint64, error) {
	applied, err := m.Applied(group)
	if err != nil {
		return 0, err
	}
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: gkey(group, 0), UpperBound: gkey(group+1, 0)})
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(w)
	for ok := it.First(); ok; ok = it.Next() {
		for _, p := range [][]byte{it.Key(), it.Value()} {
			bw.Write(binary.AppendUvarint(nil, uint64(len(p))))
			bw.Write(p)
		}
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return applied, bw.Flush()
}

// maxSnapshotField bounds one key or value read from a snapshot stream.
const maxSnapshotField = 64 << 20

// Restore replaces the group's state with a snapshot's, in one synced batch.
func (m *SM) Restore(group uint64, index uint64, r io.Reader) error {
	b := m.db.Pebble().NewBatch()
	if err := b.DeleteRange(gkey(group, 0), gkey(group+1, 0), nil); err != nil {
		b.Close()
		return err
	}
	br := bufio.NewReader(r)
	for {
		var pair [2][]byte
		for i := range pair {
			n, err := binary.ReadUvarint(br)
			if err == io.EOF && i == 0 {
				goto done
			}
			if err != nil || n > maxSnapshotField {
				b.Close()
				return fmt.Errorf("model: restore group %d: bad snapshot stream: %v", group, err)
			}
			pair[i] = make([]byte, n)
			if _, err := io.ReadFull(br, pair[i]); err != nil {
				b.Close()
				return fmt.Errorf("model: restore group %d: %w", group, err)
			}
		}
		if err := b.Set(pair[0], pair[1], nil); err != nil {
			b.Close()
			return err
		}
	}
done:
	if err := b.Set(gkey(group, 'a'), u64(index), nil); err != nil {
		b.Close()
		return err
	}
	if err := m.db.Commit(b, true); err != nil {
		return fmt.Errorf("model: restore group %d: %w", group, err)
	}
	return b.Close()
}
