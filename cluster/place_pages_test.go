package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"tally/cluster/replica"
)

// The directory's placements are listed a page at a time: no answer
// carries more than PlacementsPageMax, each names the session the next
// begins after, and the pages together are the whole directory. A first
// request signed as the previous release signed it is answered with the
// first page.
func TestPlacementsInPages(t *testing.T) {
	nodes := startThree(t)
	secret := nodes[0].cfg.Secret
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 2*PlacementsPageMax + 100
	placeMany(ctx, t, nodes[0].Node, n)
	whole, err := nodes[1].ListPlacements(ctx)
	if err != nil || len(whole) != n {
		t.Fatalf("%d placements: %v", len(whole), err)
	}
	var paged []replica.Placement
	var pages []int
	for after := ""; ; {
		var req any = SignPlacementsAfter(secret, nodes[1].target(), time.Now(), after)
		if after == "" {
			req = SignPlacements(secret, nodes[1].target(), time.Now())
		}
		code, body := post(t, nodes[1].cfg.Addr, PlacementsPath, req)
		var doc Placements
		if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
			t.Fatalf("page after %q: %d %s", after, code, body)
		}
		paged = append(paged, doc.Placements...)
		pages = append(pages, len(doc.Placements))
		if doc.Next == "" {
			break
		}
		if doc.Next != doc.Placements[len(doc.Placements)-1].Name() {
			t.Fatalf("next %q, the page's last %q", doc.Next, doc.Placements[len(doc.Placements)-1].Name())
		}
		after = doc.Next
	}
	if !slices.Equal(pages, []int{PlacementsPageMax, PlacementsPageMax, 100}) || !slices.Equal(paged, whole) {
		t.Fatalf("pages of %v, %d placements in all", pages, len(paged))
	}
	// A page asked for with another name than it was signed for is refused.
	req := SignPlacementsAfter(secret, nodes[1].target(), time.Now(), "acme/s00001")
	req.After = "acme/s00002"
	if code, body := post(t, nodes[1].cfg.Addr, PlacementsPath, req); code != 403 {
		t.Fatalf("a page after another name than signed: %d %s", code, body)
	}
}

// placeMany records n placements (acme/s00000 on, each in a group other
// than its hash's) through node's meta group, 16 at a time.
func placeMany(ctx context.Context, t *testing.T, n *Node, count int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < count; i += 16 {
				session := fmt.Sprintf("s%05d", i)
				p := replica.Placement{Tenant: "acme", Session: session, Group: otherGroup(session)}
				if _, err := proposeMeta[replica.Placement](ctx, n, replica.MetaCommand{Op: replica.OpPlacementSet, Placement: &p, TS: time.Now().UnixNano()}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A node that joins after the meta group's log was compacted past the
// directory's entries installs the directory from a snapshot, streamed in
// ranges, and holds the same entries in the same ranges.
func TestJoinerInstallsTheDirectoryInRanges(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 12_000 // past the meta group's compaction (10,000 entries)
	placeMany(ctx, t, nodes[0].Node, n)
	want := nodes[0].Replica().Directory()
	if len(want.Ranges()) < 3 {
		t.Fatalf("%d placements in %d ranges", want.Len(), len(want.Ranges()))
	}
	n4 := startJoiner(t, t.TempDir(), 4, nodes[0])
	waitFor(t, "node 4 holding the directory", 60*time.Second, func() bool { return n4.Replica().PlacementCount() == n })
	got := n4.Replica().Directory()
	if !slices.Equal(got.Ranges(), want.Ranges()) || !slices.Equal(got.From("", n+1), want.From("", n+1)) {
		t.Fatalf("node 4's directory: %d entries in %d ranges, node 1's %d in %d", got.Len(), len(got.Ranges()), want.Len(), len(want.Ranges()))
	}
	if n4.Replica().MetaRestores() == 0 {
		t.Fatal("node 4 installed no snapshot of the meta group")
	}
}
