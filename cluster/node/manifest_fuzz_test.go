package node

import (
	"bytes"
	"testing"
)

// FuzzUnmarshalManifest feeds arbitrary bytes as a snapshot's manifest (a
// peer's MsgSnap data): never a panic, and what decodes encodes back to
// the same bytes.
func FuzzUnmarshalManifest(f *testing.F) {
	f.Add([]byte{})
	f.Add(Manifest{Inline: []byte(`{"applied":{"index":7}}`), Entries: []ManifestEntry{{Kind: "log", Name: "acme/main", Length: 12}, {Kind: "object", Name: "ab", Length: 3}}}.Marshal())
	f.Add(Manifest{Inline: []byte("x")}.Marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := UnmarshalManifest(data)
		if err != nil {
			return
		}
		if again := m.Marshal(); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v, which encodes as %q, not %q", m, again, data)
		}
	})
}
