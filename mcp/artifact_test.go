package mcp_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// head is the document before an artifact's bytes.
type head struct {
	SchemaVersion int    `json:"schema_version"`
	Claim         string `json:"claim"`
	Artifact      string `json:"artifact"`
	Digest        string `json:"digest"`
	Content       string `json:"content"`
	Size          int64  `json:"size"`
	Offset        int64  `json:"offset"`
	Length        int    `json:"length"`
	Truncated     bool   `json:"truncated"`
	NextOffset    int64  `json:"next_offset"`
	Encoding      string `json:"encoding"`
}

// readArtifact reads an artifact's bytes through the tool: its head and
// the bytes as the tool wrote them.
func readArtifact(t *testing.T, cs *sdk.ClientSession, args map[string]any) (head, string) {
	t.Helper()
	res := call(t, cs, "tally_claim_read/artifact", args)
	if res.IsError || len(res.Content) != 2 || res.StructuredContent != nil {
		t.Fatalf("artifact %v: %v %s", args, res.IsError, text(res))
	}
	var h head
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &h); err != nil {
		t.Fatal(err)
	}
	return h, res.Content[1].(*sdk.TextContent).Text
}

// An evaluator reads the bytes it judges: a patch as text with its
// digest, binary bytes as base64, a large one a bounded window at a time
// (never cutting a character in two), and a range past the end is
// refused, reading nothing into the log.
func TestArtifactRead(t *testing.T) {
	f := newFixture(t)
	maintainer, parser := f.client("maintainer"), f.client("parser")
	ok(t, maintainer, "tally_claim/create", args(c17))
	ok(t, maintainer, "tally_claim/post", map[string]any{"claim": "C17"})
	ok(t, parser, "tally_claim/receipt.acquire", map[string]any{"claim": "C17"})
	patch := "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete }\n"
	binary := string([]byte{0xff, 0x00, 0xfe, 'x', 0x80})
	// 65535 bytes of ASCII then "é" (two bytes): the first window ends
	// inside it.
	large := strings.Repeat("a", 65535) + "é" + strings.Repeat("b", 1000)
	for id, body := range map[string]string{"patch-a": patch, "blob": binary, "large": large} {
		ok(t, parser, "tally_claim/artifact.publish", map[string]any{"claim": "C17", "artifact": id, "generation": 1,
			"kind": "patch", "content_base64": base64.StdEncoding.EncodeToString([]byte(body))})
	}
	shown := ok(t, maintainer, "tally_claim_read/show", map[string]any{"claim": "C17"})
	digests := map[string]string{}
	for _, a := range shown["claim"].(map[string]any)["artifacts"].([]any) {
		m := a.(map[string]any)
		digests[m["artifact"].(string)] = m["digest"].(string)
	}

	h, got := readArtifact(t, maintainer, map[string]any{"claim": "C17", "artifact": "patch-a"})
	if got != patch || h.Encoding != "utf-8" || h.Digest != digests["patch-a"] || h.Digest == "" || h.Size != int64(len(patch)) ||
		h.Length != len(patch) || h.Truncated || h.Content == "" || h.SchemaVersion != 1 {
		t.Fatalf("patch: %+v %q", h, got)
	}
	h, got = readArtifact(t, maintainer, map[string]any{"claim": "C17", "artifact": "blob"})
	if raw, err := base64.StdEncoding.DecodeString(got); err != nil || string(raw) != binary || h.Encoding != "base64" || h.Length != len(binary) {
		t.Fatalf("binary: %+v %q", h, got)
	}
	// The first window stops before the character it would cut.
	h, got = readArtifact(t, maintainer, map[string]any{"claim": "C17", "artifact": "large"})
	if h.Encoding != "utf-8" || h.Length != 65535 || got != large[:65535] || !h.Truncated || h.NextOffset != 65535 || h.Size != int64(len(large)) {
		t.Fatalf("first window: %+v (%d bytes)", h, len(got))
	}
	h, got = readArtifact(t, maintainer, map[string]any{"claim": "C17", "artifact": "large", "offset": h.NextOffset})
	if got != large[65535:] || h.Truncated || h.Offset != 65535 {
		t.Fatalf("second window: %+v %q", h, got[:10])
	}
	h, got = readArtifact(t, maintainer, map[string]any{"claim": "C17", "artifact": "patch-a", "offset": 4, "limit": 5})
	if got != patch[4:9] || !h.Truncated || h.NextOffset != 9 {
		t.Fatalf("a range: %+v %q", h, got)
	}

	size := f.logSize("default", "default")
	for _, c := range []struct {
		args map[string]any
		code string
		says string
	}{
		{map[string]any{"claim": "C17", "artifact": "patch-a", "limit": 65537}, "invalid", "limit: must be 1 to 65536"},
		{map[string]any{"claim": "C17", "artifact": "patch-a", "offset": -1}, "invalid", "offset: must not be negative"},
		{map[string]any{"claim": "C17", "artifact": "patch-a", "offset": len(patch) + 1}, "invalid", "offset: past the end"},
		{map[string]any{"claim": "C17", "artifact": "nope"}, "not_found", "nope"},
		{map[string]any{"claim": "C17"}, "invalid", "artifact: required"},
	} {
		if msg, code := refusal(t, maintainer, "tally_claim_read/artifact", c.args); code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%v: %q %s, want %s saying %q", c.args, msg, code, c.code, c.says)
		}
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a read appended")
	}
}
