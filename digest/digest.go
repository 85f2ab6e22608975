// Package digest holds the content identity of evidence: domain-separated
// BLAKE3 digests, pure functions that do no I/O (the content-addressed store
// of the bytes is package artifact), so the claim core can import them.
//
// Two digests name an artifact:
//
//   - the content digest covers the bytes alone (family "content");
//   - the artifact digest covers the immutable description (kind, schema,
//     producer, claim, work cycle, role, slot, size) together with the content
//     digest (family "artifact").
//
// Each family hashes under its own versioned BLAKE3 derive-key context, and
// every field is length-prefixed, so "ab"+"c" and "a"+"bc" never collide. An
// artifact's own id is deliberately outside both digests: two artifacts with
// the same description and bytes have the same digest, and the id is what
// tells them apart.
package digest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/zeebo/blake3"
)

// Family is a versioned hash definition. Stored: do not rename the contexts.
type Family string

// The object families. Each context string is the BLAKE3 derive-key context;
// a new version of a definition gets a new context, never an edited one.
const (
	FamilyContent  Family = "tally 2026-09 artifact content v1"
	FamilyArtifact Family = "tally 2026-09 artifact description v1"
)

// Size is the length of every digest in bytes.
const Size = 32

// ContentDigest identifies a sequence of bytes (family FamilyContent).
type ContentDigest [Size]byte

// Digest identifies an artifact: its description and its content digest
// (family FamilyArtifact), or any other family's record.
type Digest [Size]byte

// String is the wire form: 64 lowercase hex digits.
func (d ContentDigest) String() string { return hex.EncodeToString(d[:]) }

// String is the wire form: 64 lowercase hex digits.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is the zero digest (never a real one).
func (d ContentDigest) IsZero() bool { return d == ContentDigest{} }

// IsZero reports whether d is the zero digest (never a real one).
func (d Digest) IsZero() bool { return d == Digest{} }

// ErrDigestSyntax is returned for a digest that is not 64 lowercase hex digits.
var ErrDigestSyntax = errors.New("digest must be 64 lowercase hex digits")

func parse32(s string) ([Size]byte, error) {
	var out [Size]byte
	if len(s) != 2*Size {
		return out, ErrDigestSyntax
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return out, ErrDigestSyntax
		}
	}
	if _, err := hex.Decode(out[:], []byte(s)); err != nil {
		return out, ErrDigestSyntax
	}
	return out, nil
}

// ParseContentDigest parses the wire form of a content digest.
func ParseContentDigest(s string) (ContentDigest, error) {
	b, err := parse32(s)
	return ContentDigest(b), err
}

// ParseDigest parses the wire form of an artifact digest.
func ParseDigest(s string) (Digest, error) {
	b, err := parse32(s)
	return Digest(b), err
}

// NewContentHasher returns a streaming hasher for content; Sum its result with
// ContentSum.
func NewContentHasher() *blake3.Hasher { return blake3.NewDeriveKey(string(FamilyContent)) }

// ContentSum finishes a hasher made by NewContentHasher.
func ContentSum(h *blake3.Hasher) ContentDigest {
	var d ContentDigest
	h.Sum(d[:0])
	return d
}

// HashContent is the content digest of b.
func HashContent(b []byte) ContentDigest {
	h := getHasher(FamilyContent)
	_, _ = h.Write(b)
	d := ContentSum(h)
	putHasher(FamilyContent, h)
	return d
}

// Description is the immutable description of an artifact: everything its
// digest covers besides the bytes. The artifact id is not here on purpose.
type Description struct {
	Kind     string // what the artifact is ("patch", "test-log", "report")
	Schema   string // the format its bytes follow ("text/x-diff", "go-test-json")
	Producer string // the participant that published it
	Claim    string // the claim it belongs to
	Cycle    uint64 // the work cycle (1-based; 0 for evaluators' result artifacts)
	Role     string // "output", "diagnostic" or "result"
	Slot     string // the declared slot it fills (output role only)
	Size     int64  // the content length in bytes
	Content  ContentDigest
}

// hasherPools keeps one pool of ready hashers per family: deriving a
// family's context key and allocating a hasher (8 KiB of buffer) costs more
// than hashing a description, and Reset keeps the derived key.
var hasherPools sync.Map // Family → *sync.Pool

func getHasher(f Family) *blake3.Hasher {
	p, ok := hasherPools.Load(f)
	if !ok {
		p, _ = hasherPools.LoadOrStore(f, &sync.Pool{New: func() any { return blake3.NewDeriveKey(string(f)) }})
	}
	return p.(*sync.Pool).Get().(*blake3.Hasher)
}

func putHasher(f Family, h *blake3.Hasher) {
	h.Reset()
	p, _ := hasherPools.Load(f)
	p.(*sync.Pool).Put(h)
}

// fieldWriter writes length-prefixed fields into a hasher.
type fieldWriter struct {
	h   *blake3.Hasher
	buf [8]byte
}

func (w *fieldWriter) bytes(b []byte) {
	binary.BigEndian.PutUint64(w.buf[:], uint64(len(b)))
	_, _ = w.h.Write(w.buf[:])
	_, _ = w.h.Write(b)
}

func (w *fieldWriter) string(s string) {
	binary.BigEndian.PutUint64(w.buf[:], uint64(len(s)))
	_, _ = w.h.Write(w.buf[:])
	_, _ = w.h.WriteString(s)
}

func (w *fieldWriter) uint64(v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	w.bytes(b[:])
}

// descriptionFieldCount is the number of fields the artifact family hashes.
// Changing it is a new family version.
const descriptionFieldCount = 9

// ArtifactDigest is the digest of an artifact's description and content.
func ArtifactDigest(d Description) Digest {
	w := fieldWriter{h: getHasher(FamilyArtifact)}
	w.uint64(descriptionFieldCount)
	w.string(d.Kind)
	w.string(d.Schema)
	w.string(d.Producer)
	w.string(d.Claim)
	w.uint64(d.Cycle)
	w.string(d.Role)
	w.string(d.Slot)
	w.uint64(uint64(d.Size))
	w.bytes(d.Content[:])
	var out Digest
	w.h.Sum(out[:0])
	putHasher(FamilyArtifact, w.h)
	return out
}

// Validate reports the first malformed field of a description.
func (d Description) Validate() error {
	switch {
	case d.Kind == "":
		return errors.New("kind: must not be empty")
	case d.Producer == "":
		return errors.New("producer: must not be empty")
	case d.Claim == "":
		return errors.New("claim: must not be empty")
	case d.Size < 0:
		return fmt.Errorf("size: must not be negative (got %d)", d.Size)
	case d.Content.IsZero():
		return errors.New("content: must be a content digest")
	}
	return nil
}
