// Package auth keeps the bearer tokens that map to participant identities
// within one tenant. Tokens are stored only as hashes, in an append-only
// file beside the ledger; a revocation is a line too, and takes effect on
// the next request because readers reload the file when it changes.
package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"tally/refuse"
	"tally/sessionname"
)

// Roles a token may carry. Stored: do not rename.
const (
	RoleAgent      = "agent"      // an ordinary participant
	RolePerson     = "person"     // a person: may extend past an expectation's lineage bound
	RoleTimekeeper = "timekeeper" // acts as the ledger's timekeeper: commits lapses and deadline facts
	RoleAdmin      = "admin"      // reads every session of its tenant
)

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool {
	switch r {
	case RoleAgent, RolePerson, RoleTimekeeper, RoleAdmin:
		return true
	}
	return false
}

// tokenContext domain-separates token hashes. Do not change.
const tokenContext = "tally 2026-11 bearer token v1"

// fileName is the token file inside the ledger directory.
const fileName = "tokens.jsonl"

// AllTenants is the tenant of a token that administers the tokens of every
// tenant (a cluster's first admin token): it reads and writes no session,
// since no session's tenant is "*".
const AllTenants = "*"

// Token is what a token grants. The secret itself is never stored.
type Token struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Participant string    `json:"participant"`
	Role        string    `json:"role"`
	Created     time.Time `json:"created"`
	Revoked     bool      `json:"revoked"`
}

// Administers reports whether t may create, list and revoke tokens of
// tenant: an admin of that tenant, or of every tenant.
func (t Token) Administers(tenant string) bool {
	return t.Role == RoleAdmin && !t.Revoked && (t.Tenant == tenant || t.Tenant == AllTenants)
}

// Record is a token as it is stored: its grant and the hash of its secret.
// Stored (the tokens file, a cluster's meta group): do not rename.
type Record struct {
	ID          string    `json:"id"`
	Hash        string    `json:"hash"`
	Tenant      string    `json:"tenant"`
	Participant string    `json:"participant"`
	Role        string    `json:"role"`
	Created     time.Time `json:"created"`
}

type line struct {
	TS          time.Time `json:"ts"`
	Type        string    `json:"type"` // "token" or "revoke"
	ID          string    `json:"id"`
	Hash        string    `json:"hash,omitempty"`
	Tenant      string    `json:"tenant,omitempty"`
	Participant string    `json:"participant,omitempty"`
	Role        string    `json:"role,omitempty"`
}

// Keeper is where a server's tokens are kept and checked: a ledger
// directory's file (Store) or a cluster's meta group.
type Keeper interface {
	Authenticate(secret string) (Token, error)
	// CreateToken mints a token and returns its secret (shown once).
	CreateToken(ctx context.Context, tenant, participant, role string, now time.Time) (string, Token, error)
	// RevokeToken revokes a token by id; the revoked token is returned.
	RevokeToken(ctx context.Context, id string, now time.Time) (Token, error)
	// ListTokens lists every token, revoked ones included, by id.
	ListTokens(ctx context.Context) ([]Token, error)
}

// Check validates what a token would grant, naming the field.
// An empty role is RoleAgent. The refusal names its field (refuse), so
// every binding answers it the same (400, or the CLI's exit 2).
func Check(tenant, participant, role string) error {
	role = roleOrAgent(role)
	if tenant == AllTenants {
		if role != RoleAdmin {
			return refuse.Invalidf("role", fmt.Sprintf("a token of every tenant (%q) must be admin, not %q", AllTenants, role))
		}
	} else if err := sessionname.Check("tenant", tenant); err != nil {
		_, rule, _ := strings.Cut(err.Error(), ": ")
		return refuse.Invalidf("tenant", rule)
	}
	if participant == "" || len(participant) > 1024 {
		return refuse.Invalidf("participant", "an identity of 1-1024 bytes is required")
	}
	if !ValidRole(role) {
		return refuse.Invalidf("role", fmt.Sprintf("must be agent, person, timekeeper or admin, not %q", role))
	}
	return nil
}

// roleOrAgent is the role a grant names, agent when it names none.
func roleOrAgent(role string) string {
	if role == "" {
		return RoleAgent
	}
	return role
}

// Shaped reports whether secret has the shape of a token Mint makes, so a
// caller can tell a token it may not know yet from garbage.
func Shaped(secret string) bool {
	id, sec, ok := strings.Cut(strings.TrimPrefix(secret, "tally_"), "_")
	return ok && len(secret) == len("tally_")+12+1+48 && isHex(id) && isHex(sec)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// Mint makes a new token: its secret (to show once) and its record (to
// store), or the reason the grant is refused.
func Mint(tenant, participant, role string, now time.Time) (string, Record, error) {
	if err := Check(tenant, participant, role); err != nil {
		return "", Record{}, err
	}
	role = roleOrAgent(role)
	var id [6]byte
	var secret [24]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Record{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Record{}, err
	}
	tok := "tally_" + hex.EncodeToString(id[:]) + "_" + hex.EncodeToString(secret[:])
	sum := newHasher().hash(tok)
	return tok, Record{ID: "tok_" + hex.EncodeToString(id[:]), Hash: hex.EncodeToString(sum[:]), Tenant: tenant,
		Participant: participant, Role: role, Created: now.UTC().Truncate(time.Second)}, nil
}

// hasher hashes secrets, reusing its BLAKE3 hashers: a fresh derive-key
// hasher allocates about 11 KB, and every authenticated request hashes its
// token.
type hasher struct{ pool *sync.Pool }

func newHasher() hasher {
	return hasher{pool: &sync.Pool{New: func() any { return blake3.NewDeriveKey(tokenContext) }}}
}

func (h hasher) hash(secret string) [32]byte {
	b := h.pool.Get().(*blake3.Hasher)
	defer h.pool.Put(b)
	b.Reset()
	var sum [32]byte
	b.WriteString(secret)
	b.Sum(sum[:0])
	return sum
}

// Table is a set of tokens held in memory, by hash and by id: what a
// Store reads from its file, and what a cluster's meta group keeps. It is
// safe for concurrent use.
type Table struct {
	h      hasher
	mu     sync.Mutex
	byHash map[[32]byte]*Token
	byID   map[string]*Token
}

// NewTable is an empty table.
func NewTable() *Table {
	return &Table{h: newHasher(), byHash: map[[32]byte]*Token{}, byID: map[string]*Token{}}
}

// Add adds a token; a malformed hash is refused.
func (t *Table) Add(r Record) error {
	raw, err := hex.DecodeString(r.Hash)
	if err != nil || len(raw) != 32 {
		return fmt.Errorf("token %s: bad hash", r.ID)
	}
	var h [32]byte
	copy(h[:], raw)
	tok := &Token{ID: r.ID, Tenant: r.Tenant, Participant: r.Participant, Role: r.Role, Created: r.Created}
	t.mu.Lock()
	t.byHash[h], t.byID[r.ID] = tok, tok
	t.mu.Unlock()
	return nil
}

// Revoke marks a token revoked and returns it; ok is false if the table
// does not hold it.
func (t *Table) Revoke(id string) (Token, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tok, ok := t.byID[id]
	if !ok {
		return Token{}, false
	}
	tok.Revoked = true
	return *tok, true
}

// Get is the token with id.
func (t *Table) Get(id string) (Token, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tok, ok := t.byID[id]
	if !ok {
		return Token{}, false
	}
	return *tok, true
}

// Len is how many tokens the table holds, revoked ones included.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// List is every token, revoked ones included, by id.
func (t *Table) List() []Token {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Token, 0, len(t.byID))
	for _, tok := range t.byID {
		out = append(out, *tok)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ErrUnauthenticated is returned for a missing, unknown or revoked token.
var ErrUnauthenticated error = unauthenticated{}

// unauthenticated is ErrUnauthenticated's type: it names its refusal code
// (service.Coded), so the HTTP binding answers it 401 without importing
// auth.
type unauthenticated struct{}

func (unauthenticated) Error() string       { return "a valid bearer token is required" }
func (unauthenticated) RefusalCode() string { return "unauthenticated" }

// Authenticate returns what the bearer token grants.
func (t *Table) Authenticate(secret string) (Token, error) {
	if secret == "" {
		return Token{}, ErrUnauthenticated
	}
	sum := t.h.hash(secret)
	t.mu.Lock()
	defer t.mu.Unlock()
	tok, ok := t.byHash[sum]
	if !ok || tok.Revoked {
		return Token{}, ErrUnauthenticated
	}
	return *tok, nil
}

// Store reads and appends the token file of one ledger directory. It is
// safe for concurrent use.
type Store struct {
	path string

	mu    sync.Mutex
	size  int64
	mtime time.Time
	table *Table
}

var _ Keeper = (*Store)(nil)

// Open returns the token store of the ledger directory root.
func Open(root string) *Store {
	return &Store{path: filepath.Join(root, fileName)}
}

// Create mints a token for participant in tenant with role, appends its
// hash, and returns the secret (shown once) and the token's record.
func (s *Store) Create(tenant, participant, role string, now time.Time) (string, Token, error) {
	secret, r, err := Mint(tenant, participant, role, now)
	if err != nil {
		return "", Token{}, err
	}
	l := line{TS: r.Created, Type: "token", ID: r.ID, Hash: r.Hash, Tenant: r.Tenant, Participant: r.Participant, Role: r.Role}
	if err := s.append(l); err != nil {
		return "", Token{}, err
	}
	return secret, Token{ID: r.ID, Tenant: r.Tenant, Participant: r.Participant, Role: r.Role, Created: r.Created}, nil
}

// Revoke appends a revocation of the token with id.
func (s *Store) Revoke(id string, now time.Time) error {
	_, err := s.RevokeToken(context.Background(), id, now)
	return err
}

// List returns every token, revoked ones included, by id.
func (s *Store) List() ([]Token, error) {
	t, err := s.reload()
	if err != nil {
		return nil, err
	}
	return t.List(), nil
}

// Authenticate returns what the bearer token grants.
func (s *Store) Authenticate(secret string) (Token, error) {
	if secret == "" {
		return Token{}, ErrUnauthenticated
	}
	t, err := s.reload()
	if err != nil {
		return Token{}, err
	}
	return t.Authenticate(secret)
}

// CreateToken is Create (Keeper).
func (s *Store) CreateToken(_ context.Context, tenant, participant, role string, now time.Time) (string, Token, error) {
	return s.Create(tenant, participant, role, now)
}

// RevokeToken appends a revocation of the token with id (Keeper).
func (s *Store) RevokeToken(_ context.Context, id string, now time.Time) (Token, error) {
	t, err := s.reload()
	if err != nil {
		return Token{}, err
	}
	tok, ok := t.Get(id)
	if !ok {
		return Token{}, fmt.Errorf("id: no token %s", id)
	}
	if err := s.append(line{TS: now.UTC().Truncate(time.Second), Type: "revoke", ID: id}); err != nil {
		return Token{}, err
	}
	tok.Revoked = true
	return tok, nil
}

// ListTokens is List (Keeper).
func (s *Store) ListTokens(context.Context) ([]Token, error) { return s.List() }

// reload rereads the file when its size or modification time changed, so a
// revocation by another process takes effect on the next request, and
// returns the table as of the file.
func (s *Store) reload() (*Table, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.table == nil || s.size != 0 {
			s.table, s.size = NewTable(), 0
		}
		return s.table, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table != nil && fi.Size() == s.size && fi.ModTime().Equal(s.mtime) {
		return s.table, nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	t, err := parseFile(b)
	if err != nil {
		return nil, err
	}
	s.table, s.size, s.mtime = t, fi.Size(), fi.ModTime()
	return t, nil
}

// parseFile reads the token file's lines into a table. A torn last line
// (an append in progress, or a crash) is ignored.
func parseFile(b []byte) (*Table, error) {
	t := NewTable()
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if !bytes.HasSuffix(b, []byte{'\n'}) && n == bytes.Count(b, []byte{'\n'})+1 {
				break
			}
			return nil, fmt.Errorf("tokens file line %d: %v", n, err)
		}
		switch l.Type {
		case "token":
			r := Record{ID: l.ID, Hash: l.Hash, Tenant: l.Tenant, Participant: l.Participant, Role: l.Role, Created: l.TS}
			if err := t.Add(r); err != nil {
				return nil, fmt.Errorf("tokens file line %d: %v", n, err)
			}
		case "revoke":
			t.Revoke(l.ID)
		}
	}
	return t, nil
}

func (s *Store) append(l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock tokens: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	return f.Sync()
}
