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
	"bytes"
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

// Snapshots: the manifest holds every key of the group but the records
// inline (the heads and the clients' outcomes, which change), and one
// "log" entry per session, of its records' bytes as of the applied index.
// Records are written once under their sequence and never change, so the
// entry can be written later from the keys, on any goroutine: the bytes a
// session held at the snapshot are still there, and what follows them is
// not written.

// kindLog is the manifest entry of a session's records.
const kindLog = "log"

// appendRecord encodes a record in a snapshot body: its hash, its value's
// length and its value.
func appendRecord(b []byte, hash []byte, value string) []byte {
	b = append(b, hash...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

// Snapshot is the group's manifest as of its applied index.
func (m *SM) Snapshot(group uint64) (uint64, node.Manifest, error) {
	applied, err := m.Applied(group)
	if err != nil {
		return 0, node.Manifest{}, err
	}
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: gkey(group, 0), UpperBound: gkey(group+1, 0)})
	if err != nil {
		return 0, node.Manifest{}, err
	}
	var man node.Manifest
	logPrefix := gkey(group, 'l')
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if !bytes.HasPrefix(k, logPrefix) {
			if !bytes.Equal(k, gkey(group, 'a')) {
				man.Inline = appendPair(man.Inline, k, v)
			}
			continue
		}
		session := string(k[len(logPrefix) : len(k)-9])
		size := uint64(len(appendRecord(nil, v[:32], string(v[32:]))))
		if n := len(man.Entries); n > 0 && man.Entries[n-1].Name == session {
			man.Entries[n-1].Length += size
		} else {
			man.Entries = append(man.Entries, node.ManifestEntry{Kind: kindLog, Name: session, Length: size})
		}
	}
	if err := it.Close(); err != nil {
		return 0, node.Manifest{}, err
	}
	return applied, man, nil
}

func appendPair(b, k, v []byte) []byte {
	for _, p := range [][]byte{k, v} {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// WriteSnapshot writes each session's records up to the manifest's length.
func (m *SM) WriteSnapshot(group uint64, man node.Manifest, w io.Writer) error {
	return man.WriteEntries(w, func(e node.ManifestEntry, w io.Writer) error {
		if e.Kind != kindLog {
			return fmt.Errorf("model: unknown snapshot entry kind %q", e.Kind)
		}
		return m.writeLog(group, e.Name, e.Length, w)
	})
}

func (m *SM) writeLog(group uint64, session string, length uint64, w io.Writer) error {
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: gkey(group, 'l', []byte(session), []byte{0}), UpperBound: gkey(group, 'l', []byte(session), []byte{1})})
	if err != nil {
		return err
	}
	defer it.Close()
	var written uint64
	var buf []byte
	for ok := it.First(); ok && written < length; ok = it.Next() {
		v := it.Value()
		buf = appendRecord(buf[:0], v[:32], string(v[32:]))
		if written+uint64(len(buf)) > length {
			return fmt.Errorf("model: session %s: a record crosses the snapshot's length %d", session, length)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		written += uint64(len(buf))
	}
	if written < length {
		return fmt.Errorf("model: session %s holds %d bytes of records, the snapshot says %d", session, written, length)
	}
	return nil
}

// maxSnapshotField bounds one key, value or record read from a snapshot.
const maxSnapshotField = 64 << 20

// Restore replaces the group's state with a snapshot's, in one synced batch.
func (m *SM) Restore(group uint64, index uint64, man node.Manifest, body io.Reader) error {
	b := m.db.Pebble().NewBatch()
	defer b.Close()
	if err := b.DeleteRange(gkey(group, 0), gkey(group+1, 0), nil); err != nil {
		return err
	}
	if err := restoreInline(b, man.Inline); err != nil {
		return fmt.Errorf("model: restore group %d: %w", group, err)
	}
	err := man.ReadEntries(body, func(e node.ManifestEntry, r io.Reader) error {
		if e.Kind != kindLog {
			return fmt.Errorf("unknown kind %q", e.Kind)
		}
		return restoreLog(b, group, e.Name, bufio.NewReader(r))
	})
	if err != nil {
		return fmt.Errorf("model: restore group %d: %w", group, err)
	}
	if err := b.Set(gkey(group, 'a'), u64(index), nil); err != nil {
		return err
	}
	if err := m.db.Commit(b, true); err != nil {
		return fmt.Errorf("model: restore group %d: %w", group, err)
	}
	return nil
}

func restoreInline(b *pebble.Batch, inline []byte) error {
	r := bytes.NewReader(inline)
	for r.Len() > 0 {
		k, err := readField(r)
		if err != nil {
			return fmt.Errorf("inline key: %w", err)
		}
		v, err := readField(r)
		if err != nil {
			return fmt.Errorf("inline value: %w", err)
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
	}
	return nil
}

func restoreLog(b *pebble.Batch, group uint64, session string, r *bufio.Reader) error {
	for seq := uint64(1); ; seq++ {
		hash := make([]byte, 32)
		if _, err := io.ReadFull(r, hash); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("session %s record %d: %w", session, seq, err)
		}
		value, err := readField(r)
		if err != nil {
			return fmt.Errorf("session %s record %d: %w", session, seq, err)
		}
		if err := b.Set(gkey(group, 'l', []byte(session), []byte{0}, u64(seq)), append(hash, value...), nil); err != nil {
			return err
		}
	}
}

type byteReader interface {
	io.Reader
	io.ByteReader
}

func readField(r byteReader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxSnapshotField {
		return nil, fmt.Errorf("field of %d bytes, limit %d", n, maxSnapshotField)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return p, nil
}
