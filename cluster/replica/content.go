package replica

// Contents: the bytes a data group's records name, by content digest,
// with their size and the nodes that held a verified copy when the write
// naming them committed. A write's bytes travel beside the raft log: the
// node that took them stores and verifies them, and its command carries
// the digest, the size and that node (Upload.Holders), never the bytes.
// Applying it, every replica records the content here, and that is all
// the apply does with the bytes: each node then owes itself a copy, which
// it fetches from a holder off the apply loop, verifies whole and stores
// before it commits its custody receipt (custody.go; the fetch is the
// node's, cluster/fetch.go). The records are the group's state: carried
// by its snapshot, and what a collection keeps (decided by the log).

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tally/artifact"
	"tally/digest"
	"tally/refuse"
)

// kindContent keys a content record: gkey(group, kindContent) + content.
const kindContent = 'o'

// contentRecord is what a group records of content its writes named: its
// size, and the nodes whose verified copy the writes named (none for
// bytes staged through the log, which every replica held).
type contentRecord struct {
	Size    int64    `json:"size"`
	Holders []uint64 `json:"holders,omitempty"`
	// MovedIn is the move whose install recorded the content here, no
	// write of the group's naming it since: the move's drop after an
	// abort removes the record (move_contents.go).
	MovedIn uint64 `json:"moved_in,omitempty"`
	// gone: removed in this batch (never written: its record is deleted).
	gone bool
}

func contentKey(group uint64, content string) []byte {
	return append(gkey(group, kindContent), content...)
}

// Beside reports whether u's bytes travel beside the log: its command
// names the nodes holding them rather than bytes staged through the log.
func (u Upload) Beside() bool { return len(u.Holders) > 0 }

// openBeside is OpenUpload of bytes beside the log: the content is
// declared (artifact.Declared), never read here; the write records it once
// it succeeds (UsedUpload). A refusal is decided from the records alone.
func (m *dataSM) openBeside(b *batchUploads, want digest.ContentDigest, u Upload) (io.ReadCloser, error) {
	if u.Size < 0 {
		return nil, refuse.Invalidf("size", "must not be negative")
	}
	for _, h := range u.Holders {
		if h == 0 {
			return nil, refuse.Invalidf("holders", "must be node ids")
		}
	}
	r, err := b.usableFor(u, m.now.Load())
	if err != nil {
		return nil, err
	}
	if !r.used() && r.Size != 0 {
		return nil, refuse.Conflictf("upload", fmt.Sprintf("upload %s staged %d bytes through the log; its command names bytes beside it", u.ID, r.Size))
	}
	return artifact.Declared{Content: want, Size: u.Size}, nil
}

// UsedUpload records, in the batch of the command being applied, that its
// write of upload u succeeded: u is used, and the group's records name its
// content, held by u's holders.
func (m *SM) UsedUpload(u Upload) error {
	b := m.dataSM.batch
	if b == nil {
		return fmt.Errorf("replica: UsedUpload outside a data group's batch")
	}
	if u.Beside() {
		r, err := b.usable(u.ID, m.dataSM.now.Load())
		if err != nil {
			return err
		}
		r.Content, r.Size = u.Content, u.Size
		b.changed[u.ID] = true
	}
	rec, ok := b.contents[u.Content]
	if !ok {
		if _, err := m.dataSM.get(contentKey(b.group, u.Content), &rec); err != nil {
			return fmt.Errorf("%w: content %s: %w", errLocalCopy, u.Content, err)
		}
	}
	rec.Size, rec.MovedIn, rec.gone = u.Size, 0, false // a write of the group's names it now
	for _, h := range u.Holders {
		if !slices.Contains(rec.Holders, h) {
			rec.Holders = append(rec.Holders, h)
		}
	}
	slices.Sort(rec.Holders)
	b.contents[u.Content] = rec
	return nil
}

// recordContents writes the batch's content records into pb.
func (b *batchUploads) recordContents(pb *pebble.Batch) error {
	for _, content := range slices.Sorted(maps.Keys(b.contents)) {
		if b.contents[content].gone {
			if err := pb.Delete(contentKey(b.group, content), nil); err != nil {
				return err
			}
			continue
		}
		if err := setJSON(pb, contentKey(b.group, content), b.contents[content]); err != nil {
			return err
		}
	}
	return nil
}

// eachContent calls f with each of the group's content records.
func (m *dataSM) eachContent(group uint64, f func(content string, r contentRecord) error) error {
	return m.scan(gkey(group, kindContent), func(content string, v []byte) error {
		var r contentRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("replica: content record %q: %w", content, err)
		}
		return f(content, r)
	})
}

// ContentHolders is what group records of content: its size and the
// nodes its writes named as holding a verified copy; known is false for
// content no record of it names.
func (m *SM) ContentHolders(group uint64, content string) (size int64, holders []uint64, known bool, err error) {
	var r contentRecord
	known, err = m.dataSM.get(contentKey(group, content), &r)
	return r.Size, r.Holders, known, err
}

// groupContentRecords are the group's content records for its snapshot:
// its records', and its used uploads' from before the records existed.
func (m *dataSM) groupContentRecords(group uint64) (map[string]contentRecord, error) {
	out := map[string]contentRecord{}
	err := m.eachUpload(group, func(_ string, r uploadRecord) error {
		if r.used() {
			out[r.Content] = contentRecord{Size: r.Size}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = m.eachContent(group, func(content string, r contentRecord) error {
		out[content] = r
		return nil
	})
	return out, err
}

// clearContents replaces the group's content records with a snapshot's,
// in pb; a snapshot from before them gives its used uploads'.
func (m *dataSM) clearContents(group uint64, pb *pebble.Batch, head snapshotHead) error {
	err := m.eachContent(group, func(content string, _ contentRecord) error { return pb.Delete(contentKey(group, content), nil) })
	if err != nil {
		return err
	}
	recs := head.Contents
	if recs == nil {
		recs = map[string]contentRecord{}
		for _, r := range head.Uploads {
			if r.used() {
				recs[r.Content] = contentRecord{Size: r.Size}
			}
		}
	}
	for _, content := range slices.Sorted(maps.Keys(recs)) {
		if _, err := digest.ParseContentDigest(content); err != nil {
			return fmt.Errorf("content record %q: %w", content, err)
		}
		if err := setJSON(pb, contentKey(group, content), recs[content]); err != nil {
			return err
		}
	}
	return nil
}
