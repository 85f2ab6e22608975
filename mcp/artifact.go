package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/refuse"
	"tally/service"
)

// artifactReadMax bounds the bytes one read of an artifact answers: a
// tool's answer is held whole in a model's context; the rest is read by
// offset.
const artifactReadMax = 64 << 10

// How the bytes of an artifact read are written.
const (
	encodingUTF8   = "utf-8"  // the bytes as they are
	encodingBase64 = "base64" // RFC 4648, standard alphabet: bytes that are not UTF-8
)

// artifactRange names the bytes of one artifact a read answers.
type artifactRange struct {
	Claim    string `json:"claim"`
	Artifact string `json:"artifact"`
	Offset   int64  `json:"offset,omitempty"`
	Limit    int64  `json:"limit,omitempty"`
}

// artifactBytes is what a read answers: a document saying which bytes
// these are (and the artifact's digest), then the bytes themselves as a
// second text, so a patch reads as a patch.
type artifactBytes struct {
	head  []byte
	bytes string
}

func (a artifactBytes) toolContent() []sdk.Content {
	return []sdk.Content{&sdk.TextContent{Text: string(a.head)}, &sdk.TextContent{Text: a.bytes}}
}

// artifactHead is the document before an artifact's bytes.
type artifactHead struct {
	SchemaVersion int    `json:"schema_version"`
	Claim         string `json:"claim"`
	Artifact      string `json:"artifact"`
	Digest        string `json:"digest"`
	Content       string `json:"content"`
	Size          int64  `json:"size"`
	Offset        int64  `json:"offset"`
	Length        int    `json:"length"`
	Truncated     bool   `json:"truncated"`
	NextOffset    int64  `json:"next_offset,omitempty"`
	Encoding      string `json:"encoding"`
}

func artifactRead() tool {
	return read("artifact", "",
		"Its bytes, as text or base64.",
		func(r *artifactRange) (artifactRange, error) {
			switch {
			case r.Offset < 0:
				return *r, refuse.Invalidf("offset", "must not be negative")
			case r.Limit < 0 || r.Limit > artifactReadMax:
				return *r, refuse.Invalidf("limit", "must be 1 to "+strconv.Itoa(artifactReadMax))
			case r.Limit == 0:
				r.Limit = artifactReadMax
			}
			return *r, nil
		}, readArtifact)
}

// readArtifact reads the range r names of the artifact's bytes, verified
// against its recorded content.
func readArtifact(svc service.Service, ctx context.Context, c service.Call, r artifactRange) (artifactBytes, error) {
	ac, err := svc.Artifact(ctx, c, r.Claim, r.Artifact)
	if err != nil {
		return artifactBytes{}, err
	}
	defer ac.Body.Close()
	size := ac.Artifact.Size
	if r.Offset > size {
		return artifactBytes{}, refuse.Invalidf("offset", fmt.Sprintf("past the end: the artifact is %d bytes", size))
	}
	if _, err := io.CopyN(io.Discard, ac.Body, r.Offset); err != nil {
		return artifactBytes{}, err
	}
	buf := make([]byte, min(r.Limit, size-r.Offset))
	if _, err := io.ReadFull(ac.Body, buf); err != nil && !errors.Is(err, io.EOF) {
		return artifactBytes{}, err
	}
	// Bytes in transit are proven the artifact's only at their end.
	if !ac.Checked {
		if _, err := io.Copy(io.Discard, ac.Body); err != nil {
			return artifactBytes{}, err
		}
	}
	h := artifactHead{SchemaVersion: 1, Claim: r.Claim, Artifact: r.Artifact, Digest: ac.Artifact.Digest, Content: ac.Content.String(),
		Size: size, Offset: r.Offset, Encoding: encodingUTF8}
	text := string(buf)
	if !utf8.Valid(buf) {
		// A range may end inside a character: end it before, if that
		// is all that is wrong.
		cut := buf
		for i := 0; i < utf8.UTFMax-1 && len(cut) > 0 && !utf8.Valid(cut); i++ {
			cut = cut[:len(cut)-1]
		}
		if utf8.Valid(cut) && r.Offset+int64(len(buf)) < size && len(cut) > 0 {
			buf, text = cut, string(cut)
		} else {
			h.Encoding, text = encodingBase64, base64.StdEncoding.EncodeToString(buf)
		}
	}
	h.Length = len(buf)
	if end := r.Offset + int64(len(buf)); end < size {
		h.Truncated, h.NextOffset = true, end
	}
	head, err := json.Marshal(h)
	if err != nil {
		return artifactBytes{}, fmt.Errorf("artifact read document: %w", err)
	}
	return artifactBytes{head: head, bytes: text}, nil
}
