package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/service"
)

// cutReader gives its bytes and then fails, as a client's connection
// lost mid-upload does.
type cutReader struct{ r io.Reader }

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

// An upload whose bytes stop coming after some were staged is abandoned
// at once: every node removes what it staged now, not after
// replica.UploadMaxAge.
func TestAnUploadCutOffIsRemovedFromEveryNodeAtOnce(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "parser", Actor: "parser"}
	staged := bytes.Repeat([]byte("x"), 2*UploadChunkSize+100)
	var err error
	for try := 0; try < 20; try++ {
		_, err = nodes[1].PublishArtifact(ctx, call, api.ClaimPublish{Claim: "C17", Artifact: "cut", Generation: 1}, &cutReader{bytes.NewReader(staged)})
		if !isUnavailable(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "connection reset by peer") {
		t.Fatalf("an upload cut off: %v", err)
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d removing the bytes it staged", n.ID()), 10*time.Second, func() bool { return len(stagedFiles(t, n.Node)) == 0 })
	}
}
