package cluster

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tally/api"
	"tally/artifact"
	"tally/digest"
	"tally/service"
	"tally/store"
)

// dirBytes is the bytes of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// custodyWhole waits until every voter holds a receipt for claimID's
// artifacts at nodes[i].
func custodyWhole(t *testing.T, n *testNode, call service.Call, claimID string) {
	t.Helper()
	waitFor(t, "every voter's custody receipt", 60*time.Second, func() bool {
		shown, err := n.Claim(context.Background(), call, claimID)
		if err != nil || len(shown.Custody) == 0 {
			return false
		}
		for _, c := range shown.Custody {
			if len(c.Missing) > 0 || len(c.Holders) != 3 {
				return false
			}
		}
		return true
	})
}

// threeWithClaim starts three nodes and opens C17 (created, posted,
// receipted) through the first, with a context for the test.
func threeWithClaim(t *testing.T) ([]*testNode, context.Context, func(actor, rid string) service.Call) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	call := parserCall
	for _, st := range proofOfWork()[:3] {
		if _, err := retried(func() (service.ClaimWritten, error) { return st.run(ctx, nodes[0].Node, call) }); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	return nodes, ctx, call
}

// An artifact's bytes travel beside the raft log: published through one
// node, every other node fetches them from it, verifies and stores them,
// and commits its receipt; the raft stores grow by far less than the
// bytes. A copy then damaged on one node is refused there, found by a
// scrub, its receipt withdrawn, repaired from another node's copy and
// receipted again; and a refused publication's bytes are collected while
// the recorded ones stay.
func TestBytesBesideTheLogFetchedRepairedCollected(t *testing.T) {
	nodes, ctx, call := threeWithClaim(t)
	raftBefore := make([]int64, 3)
	for i, n := range nodes {
		raftBefore[i] = dirBytes(t, filepath.Join(n.cfg.Data, "raft"))
	}
	big := make([]byte, 8<<20)
	rng := rand.NewChaCha8([32]byte{7})
	rng.Read(big)
	content := digest.HashContent(big)
	if _, err := retried(func() (service.ClaimWritten, error) {
		return nodes[1].PublishArtifact(ctx, call("parser", "pub-big"), api.ClaimPublish{Claim: "C17", Artifact: "big", Slot: "change", Generation: 1, Kind: "patch"}, bytes.NewReader(big))
	}); err != nil {
		t.Fatalf("publish through node 2: %v", err)
	}
	custodyWhole(t, nodes[0], call("", ""), "C17")
	for i, n := range nodes {
		body := readArtifact(t, n.Node, call("", ""), "C17", "big")
		if !bytes.Equal(body, big) {
			t.Fatalf("node %d serves %d bytes", n.ID(), len(body))
		}
		grew := dirBytes(t, filepath.Join(n.cfg.Data, "raft")) - raftBefore[i]
		if grew > int64(len(big))/8 {
			t.Errorf("node %d's raft store grew by %d bytes for an artifact of %d", n.ID(), grew, len(big))
		}
		if got := n.metrics.fetched.Load(); (n.ID() == nodes[1].ID()) != (got == 0) {
			t.Errorf("node %d fetched %d copies", n.ID(), got)
		}
	}

	// A copy damaged on node 3: refused there, never served.
	damaged := nodes[2]
	path := artifact.ObjectPath(store.ObjectsDir(damaged.Replica().Root()), content)
	if err := os.WriteFile(path, append(slices.Clone(big[:len(big)-1]), 'x'), 0o644); err != nil {
		t.Fatal(err)
	}
	// The scrubber finds it: the node withdraws its receipt and repairs
	// its copy from another's, then receipts it again.
	objs, err := artifact.OpenStore(store.ObjectsDir(damaged.Replica().Root()))
	if err != nil {
		t.Fatal(err)
	}
	sc := &artifact.Scrubber{Store: objs, Logger: damaged.log, Found: damaged.FoundDamaged}
	bad, err := sc.Pass(ctx)
	if err != nil || len(bad) != 1 || bad[0].Content != content {
		t.Fatalf("the scrub found %v: %v", bad, err)
	}
	waitFor(t, "the damaged copy repaired", 60*time.Second, func() bool {
		return damaged.metrics.repaired.Load() >= 1 && objs.Verify(ctx, content) == nil
	})
	if got := damaged.metrics.withdrawn.Load(); got < 1 {
		t.Errorf("receipts withdrawn: %d", got)
	}
	custodyWhole(t, nodes[0], call("", ""), "C17")
	if body := readArtifact(t, damaged.Node, call("", ""), "C17", "big"); !bytes.Equal(body, big) {
		t.Fatalf("the repaired copy: %d bytes", len(body))
	}
	// Damaged again, and read before any scrub: the read is answered from
	// a verified copy fetched from another holder, never from the damaged
	// one, and leaves the copy here whole.
	if err := os.WriteFile(path, append(slices.Clone(big[:len(big)-1]), 'y'), 0o644); err != nil {
		t.Fatal(err)
	}
	ac, err := damaged.Artifact(ctx, call("", ""), "C17", "big")
	if err != nil {
		t.Fatalf("a read of a damaged copy: %v", err)
	}
	served, err := io.ReadAll(ac.Body)
	ac.Body.Close()
	if err != nil || !bytes.Equal(served, big) {
		t.Fatalf("a read of a damaged copy served %d bytes (%v)", len(served), err)
	}
	if err := objs.Verify(ctx, content); err != nil {
		t.Fatalf("the copy after the read: %v", err)
	}

	// A refused publication's bytes stay on the node asked until a
	// collection past the grace removes them; recorded bytes stay.
	refused := []byte("bytes of a publication the ledger refuses\n")
	if _, err := retried(func() (service.ClaimWritten, error) {
		return nodes[1].PublishArtifact(ctx, call("parser", "pub-refused"), api.ClaimPublish{Claim: "C99", Artifact: "nope", Generation: 1}, bytes.NewReader(refused))
	}); err == nil {
		t.Fatal("a publication on an unknown claim was taken")
	}
	gone := digest.HashContent(refused)
	if !objs.Has(content) {
		t.Fatal("lost the repaired copy")
	}
	held, err := artifact.OpenStore(store.ObjectsDir(nodes[1].Replica().Root()))
	if err != nil {
		t.Fatal(err)
	}
	if !held.Has(gone) {
		t.Fatal("the refused bytes were not stored at the node asked")
	}
	got, err := nodes[1].CollectArtifacts(ctx, 0)
	if err != nil || len(got.Objects) != 1 || got.Objects[0].Content != gone {
		t.Fatalf("collected %+v: %v", got, err)
	}
	if held.Has(gone) || !held.Has(content) {
		t.Fatal("the collection removed the wrong bytes")
	}
}

// A fetch whose holder is gone, or holds a damaged copy, goes on to
// another node holding a verified copy: the node that took the bytes
// stops (or its copy rots) before the last voter fetched them, which then
// fetches from the node that receipted its copy, and receipts its own; a
// holder found serving a damaged copy repairs it.
func TestAFetchGoesOnToAnotherHolder(t *testing.T) {
	for _, holderDamaged := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "damaged"}[holderDamaged], func(t *testing.T) {
			nodes, ctx, call := threeWithClaim(t)
			took, first, last := nodes[1], nodes[0], nodes[2]
			last.holdReceipts.Store(true) // as a node whose fetch has not begun
			body := bytes.Repeat([]byte("+\tif len(s) < 6 { return errIncomplete }\n"), 50_000)
			content := digest.HashContent(body)
			if _, err := retried(func() (service.ClaimWritten, error) {
				return took.PublishArtifact(ctx, call("parser", "pub"), api.ClaimPublish{Claim: "C17", Artifact: "patch", Slot: "change", Generation: 1, Kind: "patch"}, bytes.NewReader(body))
			}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the first node's receipt", 60*time.Second, func() bool {
				shown, err := first.Claim(ctx, call("", ""), "C17")
				return err == nil && len(shown.Custody) == 1 && slices.Equal(shown.Custody[0].Holders, []uint64{first.ID(), took.ID()})
			})
			tookPath := artifact.ObjectPath(store.ObjectsDir(took.Replica().Root()), content)
			if holderDamaged {
				if err := os.WriteFile(tookPath, append(slices.Clone(body[:len(body)-1]), 'x'), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				took.stop(t)
			}
			last.holdReceipts.Store(false)
			objs, err := artifact.OpenStore(store.ObjectsDir(last.Replica().Root()))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the last node's copy", 60*time.Second, func() bool { return objs.Verify(ctx, content) == nil })
			if got := last.metrics.fetchFailed.Load(); got < 1 {
				t.Errorf("fetches failed at node %d: %d (its first holder was stopped or damaged)", last.ID(), got)
			}
			waitFor(t, "the last node's receipt", 60*time.Second, func() bool {
				shown, err := first.Claim(ctx, call("", ""), "C17")
				return err == nil && len(shown.Custody) == 1 && slices.Contains(shown.Custody[0].Holders, last.ID())
			})
			if holderDamaged {
				waitFor(t, "the damaged holder's copy repaired", 60*time.Second, func() bool {
					b, err := os.ReadFile(tookPath)
					return err == nil && bytes.Equal(b, body)
				})
			}
		})
	}
}
