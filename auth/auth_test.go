package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zeebo/blake3"
)

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func TestCreateAuthenticateRevoke(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	secret, tok, err := s.Create("acme", "reviewer", RoleAgent, t0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Authenticate(secret)
	if err != nil || got.Participant != "reviewer" || got.Tenant != "acme" || got.ID != tok.ID {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, fileName))
	if len(raw) == 0 || containsBytes(raw, secret) {
		t.Fatal("the token's secret is stored")
	}
	// Another process's store sees the revocation on its next request.
	other := Open(dir)
	if _, err := other.Authenticate(secret); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(tok.ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Authenticate(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked token accepted: %v", err)
	}
	for _, bad := range [][3]string{{"../x", "p", RoleAgent}, {"acme", "", RoleAgent}, {"acme", "p", "root"}} {
		if _, _, err := s.Create(bad[0], bad[1], bad[2], t0); err == nil {
			t.Errorf("created %v", bad)
		}
	}
	if _, err := s.Authenticate("tally_nope"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatal("unknown token accepted")
	}
}

func containsBytes(b []byte, s string) bool {
	return len(s) > 0 && string(b) != "" && (len(b) >= len(s)) && (indexOf(string(b), s) >= 0)
}

func indexOf(h, n string) int {
	for i := 0; i+len(n) <= len(h); i++ {
		if h[i:i+len(n)] == n {
			return i
		}
	}
	return -1
}

// FuzzTokensFile feeds arbitrary bytes as the tokens file: no panic, and
// nothing authenticates from a file that holds no token line.
func FuzzTokensFile(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-09-01T12:00:00Z","type":"token","id":"tok_1","hash":"00","tenant":"a","participant":"p","role":"agent"}` + "\n"))
	f.Add([]byte("{\"type\":\"revoke\",\"id\":\"tok_1\"}\n{\"ty"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, fileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := Open(dir)
		if _, err := s.Authenticate("tally_0000_0000"); err == nil {
			t.Fatal("a token authenticated from fuzzed bytes")
		}
		_, _ = s.List()
	})
}

// A reused hasher hashes as a fresh one does.
func TestHashTokenReuse(t *testing.T) {
	h := newHasher()
	for _, secret := range []string{"a", "tally_secret", "a"} {
		var want [32]byte
		fresh := blake3.NewDeriveKey(tokenContext)
		fresh.WriteString(secret)
		fresh.Sum(want[:0])
		if got := h.hash(secret); got != want {
			t.Fatalf("%q: reused hasher gives %x, want %x", secret, got, want)
		}
	}
}

// A minted token authenticates from a table holding its record, never
// from its id or a token of the same shape; a revoked one does not.
func TestTableMintShaped(t *testing.T) {
	secret, rec, err := Mint(AllTenants, "ops", RoleAdmin, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !Shaped(secret) || Shaped(rec.ID) || Shaped("tally_zz_"+secret[19:]) || Shaped(secret+"0") {
		t.Fatalf("Shaped: %q %q", secret, rec.ID)
	}
	tb := NewTable()
	if err := tb.Add(rec); err != nil {
		t.Fatal(err)
	}
	got, err := tb.Authenticate(secret)
	if err != nil || got.Tenant != AllTenants || got.Role != RoleAdmin || got.ID != rec.ID {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	other, _, _ := Mint("acme", "ops", RoleAdmin, t0)
	if _, err := tb.Authenticate(other); !errors.Is(err, ErrUnauthenticated) {
		t.Fatal("a token the table does not hold authenticated")
	}
	if !got.Administers("acme") || !got.Administers("other") {
		t.Fatal("a token of every tenant administers every tenant")
	}
	if tok, ok := tb.Revoke(rec.ID); !ok || !tok.Revoked {
		t.Fatal("revoke")
	}
	if _, err := tb.Authenticate(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatal("a revoked token authenticated")
	}
	if err := tb.Add(Record{ID: "tok_x", Hash: "zz"}); err == nil {
		t.Fatal("a malformed hash was added")
	}
}

func TestCheckGrants(t *testing.T) {
	for _, c := range []struct {
		tenant, participant, role, want string
	}{
		{"acme", "p", RoleAgent, ""},
		{AllTenants, "p", RoleAdmin, ""},
		{AllTenants, "p", RoleAgent, `role: a token of every tenant ("*") must be admin, not "agent"`},
		{"acme", "", RoleAgent, "participant: an identity of 1-1024 bytes is required"},
		{"acme", "p", "root", `role: must be agent, person, timekeeper or admin, not "root"`},
	} {
		err := Check(c.tenant, c.participant, c.role)
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("Check(%q, %q, %q) = %v, want %q", c.tenant, c.participant, c.role, err, c.want)
		}
	}
	if _, r, err := Mint("acme", "p", "", t0); err != nil || r.Role != RoleAgent {
		t.Errorf("a grant of no role mints %q (%v), want agent", r.Role, err)
	}
	if err := Check("acme", "p", ""); err != nil {
		t.Errorf("no role: %v, want agent's grant", err)
	}
	if tok := (Token{Tenant: "acme", Role: RoleAgent}); tok.Administers("acme") {
		t.Error("an agent administers tokens")
	}
	if tok := (Token{Tenant: "acme", Role: RoleAdmin}); tok.Administers("other") || !tok.Administers("acme") {
		t.Error("an admin administers its tenant's tokens, and only those")
	}
}
