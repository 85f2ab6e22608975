package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/claim"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// c17 is the seed's claim: Behavior and Review, both the maintainer's, on
// the same change.
const c17 = `{"claim":"C17","respondent":"parser","work":"reject incomplete Unicode escapes",
 "scope":"string parser and its regression tests",
 "slots":[{"name":"change","mode":"required","checks":[
  {"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":2},
  {"id":"review","validator":{"name":"review","version":"1"},"evaluator":"maintainer","mode":"required","phases":["quality"],"attempts":1}]}]}`

// patchA is an artifact of three chunks.
var patchA = bytes.Repeat([]byte("+\tif len(s) < 6 { return errIncomplete } // fixed escape\n"), (2*UploadChunkSize+1000)/56+1)

// claimStep is one write of the story, through a Service.
type claimStep struct {
	name string
	run  func(ctx context.Context, svc service.Service, call func(actor, rid string) service.Call) (service.ClaimWritten, error)
	// refused is the step the ledger refuses.
	refused bool
}

// proofOfWork is the seed's lifecycle: C17's patch A published (several
// chunks) and bound in a testament, its behavior check begun and passed
// with evidence, a verdict by the wrong evaluator refused, its review
// failed; the successor C18 with patch B passing both.
func proofOfWork() []claimStep {
	publish := func(claimID, id, rid string, body []byte) claimStep {
		return claimStep{name: "publish " + id, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
			return s.PublishArtifact(ctx, call("parser", rid), api.ClaimPublish{Claim: claimID, Artifact: id, Slot: "change", Generation: 1, Kind: "patch"}, bytes.NewReader(body))
		}}
	}
	deliver := func(claimID, art string) []claimStep {
		return []claimStep{
			{name: "close " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				return s.CloseTestament(ctx, call("parser", claimID+"-close"), api.ClaimTestament{Claim: claimID, Testament: "T1", Generation: 1, Outcome: "complete",
					Summary: "length check", Bindings: []claim.Binding{{Slot: "change", Artifact: art}}})
			}},
			{name: "post T1 of " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				return s.PostTestament(ctx, call("parser", claimID+"-tpost"), api.ClaimTestamentRef{Claim: claimID, Testament: "T1"})
			}},
			{name: "receive T1 of " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				return s.ReceiveTestament(ctx, call("maintainer", claimID+"-trecv"), api.ClaimTestamentRef{Claim: claimID, Testament: "T1"})
			}},
		}
	}
	report := func(actor, claimID, check, art, result, ev string, refused bool) claimStep {
		return claimStep{name: actor + " reports " + check + " " + result + " on " + claimID, refused: refused, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
			d := api.ClaimCheck{Claim: claimID, Check: check, Artifact: art, Result: result, Evidence: ev}
			return s.ReportCheck(ctx, call(actor, claimID+check+ev), d, &service.Evidence{Name: ev + ".log", Body: strings.NewReader(check + ": " + result + "\n")})
		}}
	}
	open := func(claimID, doc string) []claimStep {
		return []claimStep{
			{name: "create " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				var d api.ClaimCreate
				if err := api.Decode("", []byte(doc), &d); err != nil {
					return service.ClaimWritten{}, err
				}
				return s.CreateClaim(ctx, call("maintainer", claimID+"-create"), d)
			}},
			{name: "post " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				return s.PostClaim(ctx, call("maintainer", claimID+"-post"), api.ClaimPost{Claim: claimID})
			}},
			{name: "receipt " + claimID, run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
				return s.AcquireReceipt(ctx, call("parser", claimID+"-receipt"), api.ClaimReceipt{Claim: claimID})
			}},
		}
	}
	steps := open("C17", c17)
	steps = append(steps, publish("C17", "patch-a", "pub-a", patchA))
	steps = append(steps, deliver("C17", "patch-a")...)
	steps = append(steps,
		claimStep{name: "begin behavior", run: func(ctx context.Context, s service.Service, call func(string, string) service.Call) (service.ClaimWritten, error) {
			return s.BeginCheck(ctx, call("maintainer", "begin"), api.ClaimBegin{Claim: "C17", Check: "behavior", Artifact: "patch-a"})
		}},
		report("maintainer", "C17", "behavior", "patch-a", "pass", "ev-1", false),
		report("parser", "C17", "review", "patch-a", "pass", "ev-2", true),
		report("maintainer", "C17", "review", "patch-a", "fail", "ev-3", false))
	steps = append(steps, open("C18", `{"claim":"C18","respondent":"parser","work":"bounds checked","predecessor":"C17"}`)...)
	steps = append(steps, publish("C18", "patch-b", "pub-b", []byte("+\tif len(s) < i+6 { return errIncomplete }\n")))
	steps = append(steps, deliver("C18", "patch-b")...)
	return append(steps,
		report("maintainer", "C18", "behavior", "patch-b", "pass", "ev-4", false),
		report("maintainer", "C18", "review", "patch-b", "pass", "ev-5", false))
}

// parserCall is a call in session acme/parser as actor, under request
// id rid.
func parserCall(actor, rid string) service.Call {
	return service.Call{Tenant: "acme", Session: "parser", Actor: actor, RequestID: rid}
}

// retried calls f until its answer is not Unavailable (a leader moving),
// at most 20 times.
func retried[R any](f func() (R, error)) (R, error) {
	r, err := f()
	for try := 0; try < 20 && isUnavailable(err); try++ {
		time.Sleep(100 * time.Millisecond)
		r, err = f()
	}
	return r, err
}

// The seed's claim lifecycle through three nodes, each write through
// another: every answer is the local ledger's (the same states, the same
// refusal), every node's logs are the same bytes and whole, every node
// holds the same objects (the artifacts' and the evidence's bytes) and no
// staged upload once used, and a publication retried under its request id
// answers the recorded document and stores nothing again.
func TestClaimsThroughThreeNodes(t *testing.T) {
	nodes := startThree(t)
	local, localRoot := newDirLocal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := parserCall
	for i, st := range proofOfWork() {
		want, werr := st.run(ctx, local, call)
		n := nodes[i%3]
		got, err := retried(func() (service.ClaimWritten, error) { return st.run(ctx, n.Node, call) })
		if (werr != nil) != st.refused {
			t.Fatalf("%s, locally: %v", st.name, werr)
		}
		if st.refused {
			if a, b := rest.Refuse(err).Document, rest.Refuse(werr).Document; !bytes.Equal(a, b) {
				t.Fatalf("%s through node %d: %s; locally: %s", st.name, n.ID(), a, b)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s through node %d: %v", st.name, n.ID(), err)
		}
		if got.Claim.State != want.Claim.State || !slices.Equal(recordTypes(got), recordTypes(want)) {
			t.Fatalf("%s through node %d: %s %v; locally %s %v", st.name, n.ID(), got.Claim.State, recordTypes(got), want.Claim.State, recordTypes(want))
		}
	}
	read := call("", "")
	for id, state := range map[string]claim.Status{"C17": claim.ValidationFailed, "C18": claim.Satisfied} {
		if v, err := nodes[2].Claim(ctx, read, id); err != nil || v.Claim.State != state {
			t.Fatalf("%s through node 3: %v %v", id, err, v.Claim.State)
		}
	}

	// A retry of the publication through another node: the recorded
	// answer, nothing appended, nothing stored again.
	waitSameLogs(t, nodes)
	objectsBefore := objectFiles(t, nodes[0].Node)
	pub := proofOfWork()[3]
	first, err := pub.run(ctx, local, call)
	if err != nil || !first.Replayed {
		t.Fatalf("a local retry: %v %v", err, first.Replayed)
	}
	again, err := retried(func() (service.ClaimWritten, error) { return pub.run(ctx, nodes[1].Node, call) })
	if err != nil || !again.Replayed || !slices.Equal(recordTypes(again), []string{"claim.artifact"}) {
		t.Fatalf("a retried publication: %v %v %v", err, again.Replayed, recordTypes(again))
	}
	logs := waitSameLogs(t, nodes)
	for _, n := range nodes {
		if got := objectFiles(t, n.Node); !slices.Equal(got, objectsBefore) {
			t.Errorf("node %d holds objects %v, want %v", n.ID(), got, objectsBefore)
		}
		// A used upload's file goes once its batch is recorded, after the
		// logs are written.
		waitFor(t, fmt.Sprintf("node %d dropping its used uploads", n.ID()), 10*time.Second, func() bool { return len(stagedFiles(t, n.Node)) == 0 })
		body := readArtifact(t, n.Node, read, "C17", "patch-a")
		if !bytes.Equal(body, patchA) {
			t.Errorf("node %d serves %d bytes of patch-a, want %d", n.ID(), len(body), len(patchA))
		}
		if v, err := n.VerifyAll(ctx, service.Call{Tenant: "acme"}); err != nil || !v.Whole {
			t.Errorf("verify at node %d: %v %s", n.ID(), err, v.JSON)
		}
		ls, err := n.ListArtifacts(ctx, read, service.ArtifactQuery{Verify: true})
		if err != nil || len(ls.Artifacts) != 6 {
			t.Fatalf("artifacts at node %d: %v %d", n.ID(), err, len(ls.Artifacts))
		}
		for _, a := range ls.Artifacts {
			if a.Stored != "ok" {
				t.Errorf("node %d: %s of %s is %s", n.ID(), a.Artifact, a.Claim, a.Stored)
			}
		}
	}
	// The cluster's log holds the local ledger's records: the refusal
	// appended nothing anywhere.
	if got, want := logTypes(t, logs["acme/parser"]), logTypes(t, localLog(t, localRoot)); !slices.Equal(got, want) {
		t.Errorf("the cluster's records %v, the local ledger's %v", got, want)
	}
}

// A node that joins after artifacts were published installs the group's
// snapshot, with the records of their bytes, and fetches the bytes from
// their holders: it serves and verifies them.
func TestLateJoinerServesArtifacts(t *testing.T) {
	dir := t.TempDir()
	n1 := startAlone(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := parserCall
	for _, st := range proofOfWork()[:7] {
		if _, err := st.run(ctx, n1.Node, call); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	n2 := startJoiner(t, dir, 2, n1)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	waitSameLogs(t, []*testNode{n1, n2})
	if n2.Replica().Restores() == 0 {
		t.Fatal("node 2 installed no snapshot with data")
	}
	if body := readArtifact(t, n2.Node, call("", ""), "C17", "patch-a"); !bytes.Equal(body, patchA) {
		t.Fatalf("node 2 serves %d bytes of patch-a, want %d", len(body), len(patchA))
	}
	if v, err := n2.VerifyArtifact(ctx, call("", ""), "C17", "patch-a"); err != nil || v.Artifacts[0].Stored != "ok" {
		t.Fatalf("verify at node 2: %v %+v", err, v)
	}
	if got, want := objectFiles(t, n2.Node), objectFiles(t, n1.Node); !slices.Equal(got, want) {
		t.Fatalf("node 2 holds objects %v, node 1 %v", got, want)
	}
	// A check begins through it: its copy of the target verifies.
	begin := api.ClaimBegin{Claim: "C17", Check: "behavior", Artifact: "patch-a"}
	if _, err := retried(func() (service.ClaimWritten, error) { return n2.BeginCheck(ctx, call("maintainer", "b"), begin) }); err != nil {
		t.Fatalf("begin at node 2: %v", err)
	}
}

// A damaged copy of a check's target at the proposer refuses the check
// there, as a local ledger does, and proposes nothing; through a node with
// a whole copy the check begins, and every node appends it, the damaged
// one too: no replica reads the bytes to decide.
func TestDamagedTargetRefusedAtTheProposerOnly(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := parserCall
	for i, st := range proofOfWork()[:7] {
		if _, err := retried(func() (service.ClaimWritten, error) { return st.run(ctx, nodes[i%3].Node, call) }); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	logs := waitSameLogs(t, nodes)
	ls, err := nodes[0].ListArtifacts(ctx, call("", ""), service.ArtifactQuery{Claim: "C17", Artifact: "patch-a"})
	if err != nil {
		t.Fatal(err)
	}
	content := ls.Artifacts[0].Content
	// Custody first: every voter's receipt for the bytes, which a copy
	// damaged before its node's receipt would withhold (a check would
	// then wait CustodyPending at every node).
	waitFor(t, "every voter's custody receipt", 30*time.Second, func() bool {
		shown, err := nodes[1].Claim(ctx, call("", ""), "C17")
		if err != nil || len(shown.Custody) == 0 {
			return false
		}
		for _, c := range shown.Custody {
			if len(c.Missing) > 0 {
				return false
			}
		}
		return true
	})
	path := filepath.Join(store.ObjectsDir(nodes[0].Replica().Root()), content[:2], content[2:])
	if err := os.WriteFile(path, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	begin := api.ClaimBegin{Claim: "C17", Check: "behavior", Artifact: "patch-a"}
	_, err = retried(func() (service.ClaimWritten, error) {
		return nodes[0].BeginCheck(ctx, call("maintainer", "begin"), begin)
	})
	if r, ok := refuse.As(err); !ok || r.Code != service.CodeDamaged {
		t.Fatalf("a check on a damaged copy: %v", err)
	}
	if again := waitSameLogs(t, nodes); !bytes.Equal(again["acme/parser"], logs["acme/parser"]) {
		t.Fatal("a refused check appended")
	}
	if _, err := retried(func() (service.ClaimWritten, error) {
		return nodes[1].BeginCheck(ctx, call("maintainer", "begin"), begin)
	}); err != nil {
		t.Fatalf("a check through a node with a whole copy: %v", err)
	}
	if again := waitSameLogs(t, nodes); bytes.Equal(again["acme/parser"], logs["acme/parser"]) {
		t.Fatal("the check appended nothing")
	}
}

func recordTypes(w service.ClaimWritten) []string {
	var out []string
	for _, r := range w.Records {
		out = append(out, r.Type)
	}
	return out
}

// logTypes is the type of each record of a log.
func logTypes(t *testing.T, log []byte) []string {
	t.Helper()
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var rec struct{ Type string }
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.Type)
	}
	return out
}

// waitSameLogs waits until every node's log of every session is the same
// bytes, and returns them by tenant/session.
func waitSameLogs(t *testing.T, nodes []*testNode) map[string][]byte {
	t.Helper()
	var logs map[string][]byte
	waitFor(t, "the same logs on every node", 20*time.Second, func() bool {
		logs = nodeLogs(t, nodes[0].Node)
		for _, n := range nodes[1:] {
			other := nodeLogs(t, n.Node)
			if len(other) != len(logs) {
				return false
			}
			for k, b := range logs {
				if !bytes.Equal(other[k], b) {
					return false
				}
			}
		}
		return true
	})
	return logs
}

// nodeLogs is every session's log on a node, by tenant/session.
func nodeLogs(t *testing.T, n *Node) map[string][]byte {
	t.Helper()
	ss, err := store.Sessions(n.Replica().Root(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, se := range ss {
		dir, _ := store.SessionDir(n.Replica().Root(), se.Tenant, se.Name)
		b, err := os.ReadFile(store.LogPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		out[se.String()] = b
	}
	return out
}

// objectFiles lists a node's content store objects (not its temp files).
func objectFiles(t *testing.T, n *Node) []string {
	// The collection lock is the store's, not an object.
	return slices.DeleteFunc(filesUnder(t, store.ObjectsDir(n.Replica().Root()), "tmp"), func(f string) bool { return f == "collect.lock" })
}

// stagedFiles lists a node's staged uploads.
func stagedFiles(t *testing.T, n *Node) []string {
	return filesUnder(t, filepath.Join(n.Replica().Root(), "uploads"), "")
}

func filesUnder(t *testing.T, root, skip string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case os.IsNotExist(err):
			return nil
		case err != nil:
			return err
		case d.IsDir() && skip != "" && d.Name() == skip:
			return filepath.SkipDir
		case !d.IsDir():
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readArtifact reads an artifact's bytes through a node, to the end.
func readArtifact(t *testing.T, n *Node, call service.Call, claimID, id string) []byte {
	t.Helper()
	ac, err := retried(func() (service.ArtifactContent, error) { return n.Artifact(context.Background(), call, claimID, id) })
	if err != nil {
		t.Fatalf("artifact %s at node %d: %v", id, n.ID(), err)
	}
	defer ac.Body.Close()
	b, err := io.ReadAll(ac.Body)
	if err != nil {
		t.Fatalf("artifact %s at node %d: %v", id, n.ID(), err)
	}
	return b
}

// dirSessions is ledgerservice.Sessions over a ledger directory, for a local
// Service to hold the cluster's answers against.
type dirSessions struct {
	root string
	open map[string]*ledger.Ledger
}

func (d *dirSessions) Open(_ context.Context, tenant, session string, create bool) (*ledger.Ledger, error) {
	key := tenant + "/" + session
	if l, ok := d.open[key]; ok {
		return l, nil
	}
	dir, err := store.SessionDir(d.root, tenant, session)
	if err != nil {
		return nil, err
	}
	if !create && !store.HasLog(dir) {
		return nil, refuse.New(service.CodeNoSuchSession, "session", "no session "+key)
	}
	cfg := ledger.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	l, err := ledger.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	d.open[key] = l
	return l, nil
}

// newDirLocal is a local Service over a new ledger directory, and the
// directory.
func newDirLocal(t *testing.T) (*ledgerservice.Local, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	ss := &dirSessions{root: root, open: map[string]*ledger.Ledger{}}
	t.Cleanup(func() {
		for _, l := range ss.open {
			l.Close()
		}
	})
	return ledgerservice.New(ss, ledgerservice.Config{Timekeeper: ledger.DefaultConfig().Timekeeper, Root: func() (string, error) { return root, nil }}), root
}

// localLog is the log of acme/parser in a local ledger directory.
func localLog(t *testing.T, root string) []byte {
	t.Helper()
	dir, _ := store.SessionDir(root, "acme", "parser")
	b, err := os.ReadFile(store.LogPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A chunk's command, with its envelope, fits a node's entry bound.
func TestAChunkFitsAnEntry(t *testing.T) {
	cmd, err := NewCommand(replica.MethodStage, service.Call{Tenant: strings.Repeat("t", 64), Session: strings.Repeat("s", 64)},
		replica.StageDoc{Upload: replica.NewUploadID(time.Now(), 1), Offset: MaxUploadSize - UploadChunkSize}, time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Payload = make([]byte, UploadChunkSize)
	b, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const header = 64 // the node's proposal header, with room to spare
	if limit := node.DefaultConfig(1).MaxEntrySize; len(b)+header > limit {
		t.Fatalf("a chunk's entry is %d bytes, over the %d a node takes", len(b)+header, limit)
	}
}
