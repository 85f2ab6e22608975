package digest

import (
	"testing"

	"github.com/zeebo/blake3"
)

// digestFields is the digest of family f over fields, each length-prefixed
// and preceded by the field count, as ArtifactDigest writes its fields: the
// tests' probe of the framing and of the families' contexts.
func digestFields(f Family, fields ...[]byte) Digest {
	w := fieldWriter{h: getHasher(f)}
	w.uint64(uint64(len(fields)))
	for _, b := range fields {
		w.bytes(b)
	}
	var d Digest
	w.h.Sum(d[:0])
	putHasher(f, w.h)
	return d
}

// The content family is domain-separated from a plain BLAKE3 hash and from
// every other family.
func TestDomainSeparation(t *testing.T) {
	b := []byte("same bytes")
	plain := blake3.Sum256(b)
	if HashContent(b) == ContentDigest(plain) {
		t.Fatal("content digest equals plain blake3")
	}
	seen := map[Digest]Family{}
	for _, f := range []Family{FamilyContent, FamilyArtifact} {
		d := digestFields(f, b)
		if g, ok := seen[d]; ok {
			t.Fatalf("families %q and %q collide", f, g)
		}
		seen[d] = f
	}
}

// ab|c must differ from a|bc: fields are length-prefixed.
func TestLengthPrefixedFields(t *testing.T) {
	a := digestFields(FamilyArtifact, []byte("ab"), []byte("c"))
	b := digestFields(FamilyArtifact, []byte("a"), []byte("bc"))
	if a == b {
		t.Fatal("ab|c == a|bc")
	}
	c := digestFields(FamilyArtifact, []byte("abc"))
	if a == c {
		t.Fatal("ab|c == abc")
	}
	base := Description{Kind: "ab", Schema: "c", Producer: "p", Claim: "C1", Cycle: 1, Role: "output", Slot: "s", Size: 3, Content: HashContent([]byte("xyz"))}
	shifted := base
	shifted.Kind, shifted.Schema = "a", "bc"
	if ArtifactDigest(base) == ArtifactDigest(shifted) {
		t.Fatal("kind/schema boundary not separated")
	}
}
