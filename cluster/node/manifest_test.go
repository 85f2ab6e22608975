package node_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"tally/cluster/node"
)

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []node.Manifest{
		{},
		{Inline: []byte(`{"applied":{"index":9}}`)},
		{Inline: []byte("h"), Entries: []node.ManifestEntry{{Kind: "log", Name: "acme/s1", Length: 1 << 40}, {Kind: "object", Name: "d1", Length: 0}}},
	} {
		b := m.Marshal()
		if m.IsEmpty() != (len(b) == 0) {
			t.Fatalf("%+v marshals to %d bytes", m, len(b))
		}
		got, err := node.UnmarshalManifest(b)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !bytes.Equal(got.Marshal(), b) || got.BodySize() != m.BodySize() || len(got.Entries) != len(m.Entries) {
			t.Fatalf("%+v read back as %+v", m, got)
		}
	}
}

func TestManifestRefusesBadBytes(t *testing.T) {
	good := node.Manifest{Inline: []byte("h"), Entries: []node.ManifestEntry{{Kind: "log", Name: "a/b", Length: 3}}}.Marshal()
	huge := node.Manifest{Entries: []node.ManifestEntry{{Kind: "log", Name: "a", Length: 1 << 62}, {Kind: "log", Name: "b", Length: 1 << 62}}}.Marshal()
	other := append([]byte(nil), good...)
	other[3] = 2 // a later version
	for name, b := range map[string][]byte{
		"not a manifest": []byte("hello"),
		"cut short":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"overflow":       huge,
		"version":        other,
	} {
		if _, err := node.UnmarshalManifest(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// WriteEntries and ReadEntries hold every entry to exactly its length.
func TestManifestEntriesTakeExactlyTheirLength(t *testing.T) {
	m := node.Manifest{Entries: []node.ManifestEntry{{Kind: "log", Name: "a", Length: 3}, {Kind: "log", Name: "b", Length: 2}}}
	write := func(parts map[string]string) (string, error) {
		var buf bytes.Buffer
		err := m.WriteEntries(&buf, func(e node.ManifestEntry, w io.Writer) error {
			_, err := io.WriteString(w, parts[e.Name])
			return err
		})
		return buf.String(), err
	}
	if body, err := write(map[string]string{"a": "abc", "b": "de"}); err != nil || body != "abcde" {
		t.Fatalf("body %q: %v", body, err)
	}
	if _, err := write(map[string]string{"a": "ab", "b": "de"}); err == nil || !strings.Contains(err.Error(), `"a": 2 of its 3 bytes`) {
		t.Fatalf("a short entry: %v", err)
	}
	if _, err := write(map[string]string{"a": "abcd", "b": "de"}); err == nil {
		t.Fatal("a long entry was written")
	}
	read := func(body string) (map[string]string, error) {
		got := map[string]string{}
		err := m.ReadEntries(strings.NewReader(body), func(e node.ManifestEntry, r io.Reader) error {
			b, err := io.ReadAll(r)
			got[e.Name] = string(b)
			return err
		})
		return got, err
	}
	if got, err := read("abcde"); err != nil || got["a"] != "abc" || got["b"] != "de" {
		t.Fatalf("read %v: %v", got, err)
	}
	if _, err := read("abcd"); err == nil {
		t.Fatal("a body cut short was read")
	}
}
