package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/internal/proctest"
	"tally/rest"
	"tally/service"
	"tally/store"
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

// An upload whose bytes stop coming leaves nothing: the node asked
// removes what it stored of them at once, no command was proposed, and no
// other node fetches anything.
func TestAnUploadCutOffIsRemovedFromEveryNodeAtOnce(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "parser", Actor: "parser"}
	staged := bytes.Repeat([]byte("x"), 2*UploadChunkSize+100)
	_, err := nodes[1].PublishArtifact(ctx, call, api.ClaimPublish{Claim: "C17", Artifact: "cut", Generation: 1}, &cutReader{bytes.NewReader(staged)})
	if err == nil || !strings.Contains(err.Error(), "connection reset by peer") {
		t.Fatalf("an upload cut off: %v", err)
	}
	for _, n := range nodes {
		if got := objectFiles(t, n.Node); len(got) != 0 {
			t.Errorf("node %d holds %v", n.ID(), got)
		}
		if got := filesUnder(t, filepath.Join(store.ObjectsDir(n.Replica().Root()), "tmp"), ""); len(got) != 0 {
			t.Errorf("node %d staged %v", n.ID(), got)
		}
	}
}

// An upload past the node's limit is refused 413 ArtifactTooLarge, and
// what was stored of it is removed at once.
func TestAnUploadPastTheLimitIsRefused(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes[1].cfg.MaxUploadBytes = 1000
	nodes[1].Node.cfg.MaxUploadBytes = 1000
	call := service.Call{Tenant: "acme", Session: "parser", Actor: "parser"}
	_, err := nodes[1].PublishArtifact(ctx, call, api.ClaimPublish{Claim: "C17", Artifact: "big", Generation: 1}, bytes.NewReader(make([]byte, 1001)))
	ref := rest.Refuse(err)
	if ref.Status != 413 || ref.Code != service.CodeArtifactTooLarge || !strings.Contains(ref.Message, "limit of 1000 bytes") {
		t.Fatalf("%d %s %s", ref.Status, ref.Code, ref.Message)
	}
	if got := filesUnder(t, store.ObjectsDir(nodes[1].Replica().Root()), ""); len(got) != 1 || got[0] != "collect.lock" {
		t.Fatalf("the node keeps %v", got)
	}
}

// A disk that fills while a node stages an upload refuses that upload
// (507 InsufficientStorage, naming the node), keeps nothing of it, and
// the node serves on. The content store is put on a small tmpfs, which
// needs the privilege to mount one.
func TestAnUploadOnAFullDiskIsRefusedNamingTheNode(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := nodes[1]
	objs := store.ObjectsDir(full.Replica().Root())
	proctest.Tmpfs(t, objs, "256k")
	call := service.Call{Tenant: "acme", Session: "parser", Actor: "parser"}
	_, err := full.PublishArtifact(ctx, call, api.ClaimPublish{Claim: "C17", Artifact: "big", Generation: 1}, bytes.NewReader(make([]byte, 1<<20)))
	ref := rest.Refuse(err)
	if ref.Status != 507 || ref.Code != service.CodeInsufficientStorage || !strings.HasPrefix(ref.Message, fmt.Sprintf("node %d: the disk of this server's content store", full.ID())) ||
		!strings.Contains(string(ref.Document), fmt.Sprintf(`"node":%d`, full.ID())) {
		t.Fatalf("%d %s %s %s", ref.Status, ref.Code, ref.Message, ref.Document)
	}
	if got := filesUnder(t, filepath.Join(objs, "tmp"), ""); len(got) != 0 {
		t.Fatalf("the refused upload left %v", got)
	}
	if _, err := retried(func() (service.PromiseWritten, error) {
		return full.DeclarePromise(ctx, service.Call{Tenant: "acme", Session: "parser", Actor: "alice", RequestID: "after"}, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
	}); err != nil {
		t.Fatalf("a write through node %d after its disk filled: %v", full.ID(), err)
	}
}
