package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"tally/auth"
	"tally/cluster/node"
	"tally/vocab"
)

func metaEntry(t *testing.T, index uint64, c MetaCommand) node.Entry {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: b}
}

// Tokens are meta commands: a created token authenticates on the replica
// (and after a restart, and on a replica restored from its snapshot); a
// retried create answers as the first; a conflicting one, a malformed one
// and the revocation of an unknown token are refused the same everywhere;
// a revoked token is refused.
func TestMetaTokens(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	secret, rec, err := auth.Mint("acme", "alice", auth.RoleAgent, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	bad := rec
	bad.Participant = "mallory"
	bad.Hash = rec.Hash[:62] + "00"
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpTokenCreate, Token: &rec}),
		metaEntry(t, 2, MetaCommand{Op: OpTokenCreate, Token: &rec}),
		metaEntry(t, 3, MetaCommand{Op: OpTokenCreate, Token: &bad}),
		metaEntry(t, 4, MetaCommand{Op: OpTokenCreate, Token: &auth.Record{ID: "tok_1", Tenant: "acme", Participant: "x", Role: "root"}}),
		metaEntry(t, 5, MetaCommand{Op: OpTokenRevoke, TokenID: "tok_nope"}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	wantCodes := []vocab.Code{"", "", vocab.Conflict, vocab.Invalid, vocab.NotFound}
	for i, e := range ents {
		out, _ := sm.Take(node.MetaGroup, e.Index)
		r, _ := vocab.As(out.Err)
		if (r == nil && wantCodes[i] != "") || (r != nil && r.Code != wantCodes[i]) {
			t.Errorf("entry %d: %v, want %q", e.Index, out.Err, wantCodes[i])
		}
	}
	if tok, err := sm.Tokens().Authenticate(secret); err != nil || tok.Participant != "alice" {
		t.Fatalf("authenticate: %+v %v", tok, err)
	}

	// The meta group's snapshot carries the tokens.
	idx, man, err := sm.Snapshot(node.MetaGroup)
	if err != nil || idx != 5 {
		t.Fatalf("snapshot at %d: %v", idx, err)
	}
	var body bytes.Buffer
	if err := sm.WriteSnapshot(node.MetaGroup, man, &body); err != nil {
		t.Fatal(err)
	}
	other, _ := openReplica(t, filepath.Join(dir, "other"), "")
	if err := other.Restore(node.MetaGroup, idx, man, &body); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Tokens().Authenticate(secret); err != nil {
		t.Fatalf("restored replica: %v", err)
	}

	if _, err := sm.Apply(node.MetaGroup, []node.Entry{metaEntry(t, 6, MetaCommand{Op: OpTokenRevoke, TokenID: rec.ID, TS: 7e9})}); err != nil {
		t.Fatal(err)
	}
	if out, _ := sm.Take(node.MetaGroup, 6); out.Err != nil || !out.Value.(TokenEntry).Revoked {
		t.Fatalf("revoke: %+v", out)
	}
	if _, err := sm.Tokens().Authenticate(secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatal("a revoked token authenticated")
	}
	// After a restart the replica holds the same tokens.
	sm.Close()
	db.Close()
	again, _ := openReplica(t, dir, "")
	if _, err := again.Tokens().Authenticate(secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatal("a revoked token authenticated after a restart")
	}
	if again.Tokens().Len() != 1 {
		t.Fatalf("%d tokens after a restart", again.Tokens().Len())
	}
}
