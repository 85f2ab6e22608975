// Package auth keeps the bearer tokens that map to participant identities
// within one tenant. Tokens are stored only as hashes, in an append-only
// file beside the ledger; a revocation is a line too, and takes effect on
// the next request because readers reload the file when it changes.
package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"tally/store"
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

// Token is what a token grants. The secret itself is never stored.
type Token struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Participant string    `json:"participant"`
	Role        string    `json:"role"`
	Created     time.Time `json:"created"`
	Revoked     bool      `json:"revoked"`
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

// Store reads and appends the token file of one ledger directory. It is
// safe for concurrent use.
type Store struct {
	path string

	mu     sync.Mutex
	size   int64
	mtime  time.Time
	byHash map[[32]byte]*Token
	byID   map[string]*Token

	// hashers are reused: a fresh derive-key hasher allocates about 11 KB,
	// and every authenticated request hashes its token.
	hashers sync.Pool
}

// Open returns the token store of the ledger directory root.
func Open(root string) *Store {
	return &Store{path: filepath.Join(root, fileName)}
}

func (s *Store) hashToken(secret string) [32]byte {
	h, ok := s.hashers.Get().(*blake3.Hasher)
	if !ok {
		h = blake3.NewDeriveKey(tokenContext)
	}
	defer s.hashers.Put(h)
	h.Reset()
	var sum [32]byte
	h.WriteString(secret)
	h.Sum(sum[:0])
	return sum
}

// Create mints a token for participant in tenant with role, appends its
// hash, and returns the secret (shown once) and the token's record.
func (s *Store) Create(tenant, participant, role string, now time.Time) (string, Token, error) {
	if err := store.CheckName("tenant", tenant); err != nil {
		return "", Token{}, err
	}
	if participant == "" || len(participant) > 1024 {
		return "", Token{}, errors.New("participant: an identity of 1-1024 bytes is required")
	}
	if !ValidRole(role) {
		return "", Token{}, fmt.Errorf("role: must be agent, person, timekeeper or admin, not %q", role)
	}
	var id [6]byte
	var secret [24]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Token{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Token{}, err
	}
	tid := "tok_" + hex.EncodeToString(id[:])
	tok := "tally_" + hex.EncodeToString(id[:]) + "_" + hex.EncodeToString(secret[:])
	sum := s.hashToken(tok)
	l := line{TS: now.UTC().Truncate(time.Second), Type: "token", ID: tid, Hash: hex.EncodeToString(sum[:]), Tenant: tenant, Participant: participant, Role: role}
	if err := s.append(l); err != nil {
		return "", Token{}, err
	}
	return tok, Token{ID: tid, Tenant: tenant, Participant: participant, Role: role, Created: l.TS}, nil
}

// Revoke appends a revocation of the token with id.
func (s *Store) Revoke(id string, now time.Time) error {
	if err := s.reload(); err != nil {
		return err
	}
	s.mu.Lock()
	_, ok := s.byID[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("id: no token %s", id)
	}
	return s.append(line{TS: now.UTC().Truncate(time.Second), Type: "revoke", ID: id})
}

// List returns every token, revoked ones included, by id.
func (s *Store) List() ([]Token, error) {
	if err := s.reload(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Token, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ErrUnauthenticated is returned for a missing, unknown or revoked token.
var ErrUnauthenticated = errors.New("a valid bearer token is required")

// Authenticate returns what the bearer token grants.
func (s *Store) Authenticate(secret string) (Token, error) {
	if secret == "" {
		return Token{}, ErrUnauthenticated
	}
	if err := s.reload(); err != nil {
		return Token{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byHash[s.hashToken(secret)]
	if !ok || t.Revoked {
		return Token{}, ErrUnauthenticated
	}
	return *t, nil
}

// reload rereads the file when its size or modification time changed, so a
// revocation by another process takes effect on the next request.
func (s *Store) reload() error {
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.mu.Lock()
		s.byHash, s.byID, s.size = map[[32]byte]*Token{}, map[string]*Token{}, 0
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byHash != nil && fi.Size() == s.size && fi.ModTime().Equal(s.mtime) {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	byHash, byID := map[[32]byte]*Token{}, map[string]*Token{}
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
				break // a torn last line: an append in progress or a crash
			}
			return fmt.Errorf("tokens file line %d: %v", n, err)
		}
		switch l.Type {
		case "token":
			raw, err := hex.DecodeString(l.Hash)
			if err != nil || len(raw) != 32 {
				return fmt.Errorf("tokens file line %d: bad hash", n)
			}
			var h [32]byte
			copy(h[:], raw)
			t := &Token{ID: l.ID, Tenant: l.Tenant, Participant: l.Participant, Role: l.Role, Created: l.TS}
			byHash[h], byID[l.ID] = t, t
		case "revoke":
			if t, ok := byID[l.ID]; ok {
				t.Revoked = true
			}
		}
	}
	s.byHash, s.byID, s.size, s.mtime = byHash, byID, fi.Size(), fi.ModTime()
	return nil
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
