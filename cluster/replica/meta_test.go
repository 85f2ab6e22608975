package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"tally/auth"
	"tally/cluster/node"
	"tally/refuse"
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
	wantCodes := []refuse.Code{"", "", refuse.Conflict, refuse.Invalid, refuse.NotFound}
	for i, e := range ents {
		out, _ := sm.Take(node.MetaGroup, e.Index)
		r, _ := refuse.As(out.Err)
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

// decideNonce is the meta group's one rule for nonces: a nonce held is a
// replay (unless the same taking proposes it again), one whose expiry the
// command's instant reached is forgotten first, and the set is bounded.
func TestDecideNonce(t *testing.T) {
	use := func(nonce, by string, expires, ts int64) MetaCommand {
		return MetaCommand{Op: OpNonceUse, Nonce: &NonceEntry{Nonce: nonce, Expires: expires, By: by}, TS: ts}
	}
	held := []NonceEntry{{Nonce: "a", Expires: 100, By: "x"}, {Nonce: "b", Expires: 50, By: "y"}}
	full := make([]NonceEntry, NoncesMax)
	for i := range full {
		full[i] = NonceEntry{Nonce: fmt.Sprint("n", i), Expires: 1000}
	}
	for _, c := range []struct {
		name string
		ns   []NonceEntry
		cmd  MetaCommand
		code refuse.Code
		left int
	}{
		{"a new nonce", held, use("c", "z", 200, 10), "", 3},
		{"a replay", held, use("a", "z", 100, 10), CodeReplayed, 2},
		{"the same taking again", held, use("a", "x", 100, 10), "", 2},
		{"a replay with no token", held, use("a", "", 100, 10), CodeReplayed, 2},
		{"b expired at 50: forgotten, taken again", held, use("b", "z", 150, 50), "", 2},
		{"a expired too", held, use("a", "z", 300, 100), "", 1},
		{"no nonce", held, MetaCommand{Op: OpNonceUse, TS: 10}, refuse.Invalid, 2},
		{"full", full, use("c", "z", 2000, 10), CodeTooManySigned, NoncesMax},
		{"full, some expired", full, use("c", "z", 2000, 1000), "", 1},
	} {
		ns, out := decideNonce(c.ns, c.cmd)
		r, _ := refuse.As(out.Err)
		if (r == nil && c.code != "") || (r != nil && r.Code != c.code) || len(ns) != c.left {
			t.Errorf("%s: %v, %d held; want %q, %d held", c.name, out.Err, len(ns), c.code, c.left)
		}
	}
	if _, out := decideNonce(held, use("a", "z", 100, 10)); out.Err.Error() != "nonce: a was used already, at this node or another: a signed request is good once (sign a new one)" {
		t.Errorf("the replay's refusal: %v", out.Err)
	}
}

// The nonces are the meta group's state: kept across a restart and
// carried by its snapshot, so every replica refuses the same replays.
func TestMetaNoncesPersist(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	first := MetaCommand{Op: OpNonceUse, Nonce: &NonceEntry{Nonce: "n1", Expires: 9e9, By: "x"}, TS: 1e9}
	if _, err := sm.Apply(node.MetaGroup, []node.Entry{metaEntry(t, 1, first)}); err != nil {
		t.Fatal(err)
	}
	replay := MetaCommand{Op: OpNonceUse, Nonce: &NonceEntry{Nonce: "n1", Expires: 9e9, By: "y"}, TS: 2e9}
	refused := func(sm *SM, index uint64) {
		t.Helper()
		if _, err := sm.Apply(node.MetaGroup, []node.Entry{metaEntry(t, index, replay)}); err != nil {
			t.Fatal(err)
		}
		out, _ := sm.Take(node.MetaGroup, index)
		if r, ok := refuse.As(out.Err); !ok || r.Code != CodeReplayed {
			t.Fatalf("replay at %d: %v", index, out.Err)
		}
	}
	refused(metaCopy(t, sm, filepath.Join(dir, "other")), 2)

	if err := sm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := openReplica(t, dir, "")
	refused(again, 2)
}
