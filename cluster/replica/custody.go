package replica

// Custody receipts: a node commits, to the group's log, that its copy of
// an artifact's bytes verified whole at the group's current placement
// epoch (epoch.go). A receipt names the content, the node and the epoch;
// one made at another epoch than the group's when it applies is refused
// as stale, so after a placement change each required copy establishes
// custody again. Receipts are part of the group's state: recorded with
// its applied index and carried by its snapshot.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/digest"
	"tally/refuse"
)

// MethodReceipt is the command that records a custody receipt. Stored in
// the raft log: do not rename.
const MethodReceipt = "Receipt"

// kindReceipt keys a receipt: gkey(group, kindReceipt) + content + "/" +
// the node in 16 hex digits.
const kindReceipt = 'c'

// ReceiptDoc is a Receipt command's document.
type ReceiptDoc struct {
	Content string `json:"content"`
	Node    uint64 `json:"node"`
	Epoch   uint64 `json:"epoch"`
	// Withdrawn takes the node's receipt back: its copy was found
	// damaged or missing (the scrubber), and it counts again only once
	// repaired and receipted anew. Taken at any epoch.
	Withdrawn bool `json:"withdrawn,omitempty"`
}

// receiptRecord is a receipt's record: the epoch it was made at.
type receiptRecord struct {
	Epoch uint64 `json:"epoch"`
	// gone: withdrawn in this batch (never written: its record is
	// deleted).
	gone bool
}

func receiptName(content string, node uint64) string {
	return fmt.Sprintf("%s/%016x", content, node)
}

func receiptKey(group uint64, name string) []byte {
	return append(gkey(group, kindReceipt), name...)
}

// receipt applies a Receipt command at the batch's epoch.
func (m *dataSM) receipt(c Command) Outcome {
	var d ReceiptDoc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return Outcome{Err: refuse.Invalidf("command", "a receipt's document: "+err.Error())}
	}
	if _, err := digest.ParseContentDigest(d.Content); err != nil {
		return Outcome{Err: refuse.Invalidf("content", "must be a content digest (64 hex digits)")}
	}
	if d.Node == 0 {
		return Outcome{Err: refuse.Invalidf("node", "must be a node id")}
	}
	b := m.batch
	if d.Withdrawn {
		b.receipts[receiptName(d.Content, d.Node)] = receiptRecord{gone: true}
		return Outcome{Value: d.Epoch}
	}
	if d.Epoch != b.epoch {
		return Outcome{Err: refuse.Conflictf("epoch", fmt.Sprintf("a receipt made at placement epoch %d; the group's is %d: verify the copy again and send one at %d", d.Epoch, b.epoch, b.epoch))}
	}
	b.receipts[receiptName(d.Content, d.Node)] = receiptRecord{Epoch: d.Epoch}
	return Outcome{Value: d.Epoch}
}

// recordReceipts writes the batch's receipts into pb.
func (b *batchUploads) recordReceipts(pb *pebble.Batch) error {
	for name, r := range b.receipts {
		if r.gone {
			if err := pb.Delete(receiptKey(b.group, name), nil); err != nil {
				return err
			}
			continue
		}
		if err := setJSON(pb, receiptKey(b.group, name), r); err != nil {
			return err
		}
	}
	return nil
}

// eachReceipt calls f with each of the group's receipts whose name starts
// with from (a content and "/", or "" for all).
func (m *dataSM) eachReceipt(group uint64, from string, f func(name string, r receiptRecord) error) error {
	return m.scan(receiptKey(group, from), func(rest string, v []byte) error {
		var r receiptRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("replica: receipt %q: %w", from+rest, err)
		}
		return f(from+rest, r)
	})
}

// Receipts are the custody receipts of content in group as this replica
// has applied them: the epoch each node's was made at, by node.
func (m *SM) Receipts(group uint64, content string) (map[uint64]uint64, error) {
	out := map[uint64]uint64{}
	err := m.dataSM.eachReceipt(group, content+"/", func(name string, r receiptRecord) error {
		_, hex, _ := strings.Cut(name, "/")
		n, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			return fmt.Errorf("replica: receipt %q: %w", name, err)
		}
		out[n] = r.Epoch
		return nil
	})
	return out, err
}

// Contents are the contents the group's records name (content.go, and
// its used uploads from before those records), each once, sorted.
func (m *SM) Contents(group uint64) ([]string, error) {
	recs, err := m.dataSM.groupContentRecords(group)
	return slices.Sorted(maps.Keys(recs)), err
}

// groupReceipts are the group's receipts for its snapshot, by name.
func (m *dataSM) groupReceipts(group uint64) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := m.eachReceipt(group, "", func(name string, r receiptRecord) error {
		out[name] = r.Epoch
		return nil
	})
	return out, err
}

// clearReceipts replaces the group's receipts with a snapshot's, in pb.
func (m *dataSM) clearReceipts(group uint64, pb *pebble.Batch, receipts map[string]uint64) error {
	err := m.eachReceipt(group, "", func(name string, _ receiptRecord) error { return pb.Delete(receiptKey(group, name), nil) })
	if err != nil {
		return err
	}
	for name, epoch := range receipts {
		if err := setJSON(pb, receiptKey(group, name), receiptRecord{Epoch: epoch}); err != nil {
			return err
		}
	}
	return nil
}

// Custody policies: how many of a group's voters at its current placement
// epoch must hold a receipt for an artifact's bytes before an evaluation
// of it begins. Stored in the meta group (Policy.Custody): do not rename.
const (
	// CustodyAll requires every voter's receipt: the default.
	CustodyAll = "all"
	// CustodyMajority requires more than half of the voters' receipts.
	CustodyMajority = "majority"
)

// CheckCustodyPolicy refuses a custody policy that is not one of the
// named ones.
func CheckCustodyPolicy(p string) error {
	if p != CustodyAll && p != CustodyMajority {
		return refuse.Invalidf("custody", fmt.Sprintf("must be %q or %q, not %q", CustodyAll, CustodyMajority, p))
	}
	return nil
}

// CustodyRequired is how many of voters copies policy requires: all of
// them (CustodyAll, and no policy recorded), or more than half
// (CustodyMajority).
func CustodyRequired(policy string, voters int) int {
	if policy == CustodyMajority {
		return voters/2 + 1
	}
	return voters
}

// CustodyWhole reports whether the voters holding a receipt at the
// group's current epoch are as many as policy requires of voters; a group
// with no voters known has no custody.
func CustodyWhole(policy string, voters, holders int) bool {
	return voters > 0 && holders >= CustodyRequired(policy, voters)
}

// OpCustody records the custody policy (MetaCommand.Custody).
const OpCustody = "cluster.custody"

// CustodySet is a custody policy's outcome: the policy now, and before.
type CustodySet struct {
	Custody string `json:"custody"`
	Was     string `json:"was"`
}

// decideCustody sets the custody policy, refusing an unnamed one; set
// again, it answers as the first.
func decideCustody(p Policy, c MetaCommand) (Policy, Outcome) {
	if err := CheckCustodyPolicy(c.Custody); err != nil {
		return p, Outcome{Err: err}
	}
	was := p.CustodyPolicy()
	p = p.clone()
	p.Custody = c.Custody
	return p, Outcome{Value: CustodySet{Custody: c.Custody, Was: was}}
}

// CustodyPolicy is the policy's custody policy: CustodyAll unless one was
// set.
func (p Policy) CustodyPolicy() string {
	if p.Custody == "" {
		return CustodyAll
	}
	return p.Custody
}
