package ledgerservice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"tally/api"
	"tally/claim"
	"tally/ledger"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// newClaimsLocal is newLocal with a content store beside the ledger.
func newClaimsLocal(t *testing.T) (*Local, *ledger.Ledger, string) {
	t.Helper()
	s, l := newLocal(t)
	root := t.TempDir()
	s.rootOf = func() (string, error) { return root, nil }
	return s, l, root
}

// A claim write retried under its request id answers the recorded
// document, and its typed result read back from it is the one the first
// execution returned; a create that names no slots and one that names an
// empty list ask the same.
func TestClaimWriteReplaysItsDocument(t *testing.T) {
	s, l, _ := newClaimsLocal(t)
	ctx := context.Background()
	c := service.Call{Actor: "maintainer", RequestID: "k1"}
	first, err := s.CreateClaim(ctx, c, api.ClaimCreate{Claim: "C1", Respondent: "parser", Work: "w", NoChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || len(first.Records) != 1 || first.Claim.State != claim.Generated {
		t.Fatalf("first: %+v", first)
	}
	before := logBytes(t, l)
	again, err := s.CreateClaim(ctx, c, api.ClaimCreate{Claim: "C1", Respondent: "parser", Work: "w", NoChecks: true, Slots: []claim.SlotSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !bytes.Equal(again.JSON, first.JSON) || !reflect.DeepEqual(again.Records, first.Records) ||
		!reflect.DeepEqual(again.Claim, first.Claim) {
		t.Fatalf("replay:\n%+v\nfirst:\n%+v", again, first)
	}
	if !bytes.Equal(before, logBytes(t, l)) {
		t.Fatal("a replay appended")
	}
	var ie *service.IdempotencyError
	if _, err := s.CreateClaim(ctx, c, api.ClaimCreate{Claim: "C1", Respondent: "parser", Work: "w2", NoChecks: true}); !errors.As(err, &ie) || ie.Code != service.CodeIdempotencyConflict {
		t.Fatalf("another document under the id: %v", err)
	}
}

// A verdict with evidence stores the bytes and publishes them in the
// verdict's own write: refused, it records no evidence; a damaged target
// is refused before the evidence is stored; the same request id with other
// evidence bytes conflicts.
func TestReportCheckWithEvidence(t *testing.T) {
	s, l, root := newClaimsLocal(t)
	ctx := context.Background()
	m, p := service.Call{Actor: "maintainer"}, service.Call{Actor: "parser"}
	must := func(w service.ClaimWritten, err error) service.ClaimWritten {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	must(s.CreateClaim(ctx, m, api.ClaimCreate{Claim: "C1", Respondent: "parser", Work: "w", Slots: []claim.SlotSpec{{Name: "change",
		Checks: []claim.CheckSpec{{ID: "behavior", Validator: claim.Validator{Name: "command"}}}}}}))
	must(s.PostClaim(ctx, m, api.ClaimPost{Claim: "C1"}))
	must(s.AcquireReceipt(ctx, p, api.ClaimReceipt{Claim: "C1"}))
	put := must(s.PublishArtifact(ctx, p, api.ClaimPublish{Claim: "C1", Artifact: "pa", Slot: "change", Generation: 1}, strings.NewReader("fixed\n")))
	a, ok := put.Claim.FindArtifact("pa")
	if !ok || a.Name != "pa" || a.Size != 6 {
		t.Fatalf("published: %+v", a)
	}
	must(s.CloseTestament(ctx, p, api.ClaimTestament{Claim: "C1", Testament: "T1", Generation: 1, Outcome: "complete", Summary: "s",
		Bindings: []claim.Binding{{Slot: "change", Artifact: "pa"}}}))
	must(s.PostTestament(ctx, p, api.ClaimTestamentRef{Claim: "C1", Testament: "T1"}))
	must(s.ReceiveTestament(ctx, m, api.ClaimTestamentRef{Claim: "C1", Testament: "T1"}))
	ev := func(s string) *service.Evidence { return &service.Evidence{Name: "log", Body: strings.NewReader(s)} }
	report := api.ClaimCheck{Claim: "C1", Check: "behavior", Artifact: "pa", Result: "pass", Evidence: "E1"}

	before := logBytes(t, l)
	wrong := report
	wrong.Digest = strings.Repeat("0", 64)
	if _, err := s.ReportCheck(ctx, m, wrong, ev("4 of 4")); !isCode(err, refuse.Conflict) || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a verdict on a wrong digest: %v", err)
	}
	if _, err := s.ReportCheck(ctx, p, report, ev("4 of 4")); !isCode(err, refuse.Forbidden) {
		t.Fatalf("a stranger's verdict: %v", err)
	}
	noID := report
	noID.Evidence = ""
	if _, err := s.ReportCheck(ctx, m, noID, ev("4 of 4")); !isCode(err, refuse.Invalid) || !strings.HasPrefix(err.Error(), "evidence: ") {
		t.Fatalf("evidence bytes without an id: %v", err)
	}
	if !bytes.Equal(before, logBytes(t, l)) {
		t.Fatal("a refused verdict appended")
	}

	// A damaged target is refused, and the evidence is never stored.
	path := filepath.Join(store.ObjectsDir(root), a.Content[:2], a.Content[2:])
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, []byte("broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReportCheck(ctx, m, report, ev("never stored")); !isCode(err, service.CodeDamaged) {
		t.Fatalf("a verdict on a damaged target: %v", err)
	}
	if _, err := s.BeginCheck(ctx, m, api.ClaimBegin{Claim: "C1", Check: "behavior", Artifact: "pa"}); !isCode(err, service.CodeDamaged) {
		t.Fatalf("a begin on a damaged target: %v", err)
	}
	if _, err := s.Artifact(ctx, m, "C1", "pa"); !isCode(err, service.CodeDamaged) {
		t.Fatalf("reading a damaged copy: %v", err)
	}
	// A Local whose caller verifies targets (a cluster's replica) appends
	// without reading them; its CheckTarget still reads them.
	begin := api.ClaimBegin{Claim: "C1", Check: "behavior", Artifact: "pa"}
	replica := New(s.sessions, Config{Now: s.now, Root: s.rootOf, TargetsVerified: true})
	if err := replica.CheckTarget(ctx, m, begin.Command()); !isCode(err, service.CodeDamaged) {
		t.Fatalf("CheckTarget of a damaged target: %v", err)
	}
	if w, err := replica.BeginCheck(ctx, m, begin); err != nil || len(w.Records) != 1 {
		t.Fatalf("a begin whose target the caller verified: %v", err)
	}
	must(s.PublishArtifact(ctx, p, api.ClaimPublish{Claim: "C1", Artifact: "pa2", Slot: "change", Generation: 1}, strings.NewReader("fixed\n"))) // the copy is stored anew

	c := m
	c.RequestID = "rep-1"
	w := must(s.ReportCheck(ctx, c, report, ev("4 of 4")))
	if w.Claim.State != claim.Satisfied || len(w.Records) < 2 {
		t.Fatalf("the verdict with its evidence: %+v", w)
	}
	if e, ok := w.Claim.FindArtifact("E1"); !ok || e.Role != string(claim.RoleResult) || e.Kind != "evidence" || e.Name != "log" {
		t.Fatalf("the evidence: %+v", e)
	}
	if again := must(s.ReportCheck(ctx, c, report, ev("4 of 4"))); !again.Replayed || !bytes.Equal(again.JSON, w.JSON) {
		t.Fatalf("the retry: %+v", again)
	}
	var ie *service.IdempotencyError
	if _, err := s.ReportCheck(ctx, c, report, ev("3 of 4")); !errors.As(err, &ie) {
		t.Fatalf("the id with other evidence bytes: %v", err)
	}
	got, err := s.Artifact(ctx, m, "C1", "E1")
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	if b, err := io.ReadAll(got.Body); err != nil || string(b) != "4 of 4" || !got.Checked {
		t.Fatalf("the evidence's bytes: %q %v", b, err)
	}
}

func isCode(err error, code refuse.Code) bool {
	r, ok := refuse.As(err)
	return ok && r.Code == code
}

func logBytes(t *testing.T, l *ledger.Ledger) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.Dir(), "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
