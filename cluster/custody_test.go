package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/cluster/replica"
	"tally/rest"
	"tally/service"
)

// A check begins on an artifact only once every voter of its group holds
// a custody receipt for its bytes at the current placement epoch: while
// one node's copy has none, the begin is refused with a retryable 503
// CustodyPending naming that node, and nothing is proposed; once it
// commits its receipt, the same begin succeeds.
func TestCheckBeginWaitsForCustodyOnEveryVoter(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := parserCall
	late := nodes[2]
	late.holdReceipts.Store(true)
	steps := proofOfWork()
	for _, st := range steps[:7] {
		if _, err := retried(func() (service.ClaimWritten, error) { return st.run(ctx, nodes[0].Node, call) }); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	begin := steps[7]
	if begin.name != "begin behavior" {
		t.Fatalf("step 7 is %s", begin.name)
	}
	// Until the others' receipts commit, they are missing too; then only
	// the late node's is.
	var ref *rest.Refusal
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := begin.run(ctx, nodes[0].Node, call)
		if !errors.As(err, &ref) || ref.Code != service.CodeCustodyPending {
			t.Fatalf("begin while node %d holds no receipt: %v", late.ID(), err)
		}
		var d struct {
			Missing []uint64 `json:"missing"`
		}
		json.Unmarshal(ref.Document, &d)
		if len(d.Missing) == 1 && d.Missing[0] == late.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("missing receipts stayed %v", d.Missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ref.Status != 503 || ref.RetryAfter <= 0 || !ref.NotCommitted() || !strings.Contains(ref.Message, "no receipt yet from node(s) 3; nothing was proposed") {
		t.Fatalf("the refusal: %d %v %s", ref.Status, ref.RetryAfter, ref.Message)
	}
	if got := nodes[0].metrics.pendingRefused.Load(); got < 1 {
		t.Fatalf("refusals counted: %v", got)
	}
	shown, err := nodes[0].Claim(ctx, call("", ""), "C17")
	if err != nil || len(shown.Custody) != 1 || shown.Custody[0].Artifact != "patch-a" || !slices.Equal(shown.Custody[0].Missing, []uint64{late.ID()}) || len(shown.Custody[0].Holders) != 2 {
		t.Fatalf("custody shown while node %d holds no receipt: %v %+v", late.ID(), err, shown.Custody)
	}
	if !strings.Contains(string(shown.JSON), `"custody":[{"artifact":"patch-a"`) {
		t.Fatalf("the claim's document: %s", shown.JSON)
	}
	late.holdReceipts.Store(false)
	got, err := retried(func() (service.ClaimWritten, error) { return begin.run(ctx, nodes[0].Node, call) })
	if err != nil {
		t.Fatalf("begin once custody is whole: %v", err)
	}
	if types := recordTypes(got); len(types) != 1 || types[0] != "claim.check.begin" {
		t.Fatalf("begin recorded %v", types)
	}
	shown, err = nodes[1].Claim(ctx, call("", ""), "C17")
	if err != nil || len(shown.Custody) != 1 || len(shown.Custody[0].Missing) != 0 || !slices.Equal(shown.Custody[0].Holders, []uint64{1, 2, 3}) {
		t.Fatalf("custody shown once whole: %v %+v", err, shown.Custody)
	}
	for _, n := range nodes {
		if got := n.metrics.receipts.Load(); got < 1 {
			t.Errorf("node %d counted %v receipts", n.ID(), got)
		}
	}
}

// Under the majority custody policy, set by an operator's signed request
// (an unnamed policy refused naming the field, nothing recorded), a check
// begins once more than half the voters hold a receipt: refused with
// CustodyPending while two of three have none, it begins with one still
// missing.
func TestCheckBeginUnderMajorityCustody(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := parserCall
	n1 := nodes[0]
	code, body := post(t, n1.cfg.Addr, CustodyPolicyPath, Sign(n1.cfg.Secret, n1.target(), CustodyRequest{Custody: "most"}))
	if code != 400 || !strings.Contains(body, `custody: must be \"all\" or \"majority\", not \"most\"`) || n1.CustodyPolicy() != replica.CustodyAll {
		t.Fatalf("custody most: %d %s; policy %s", code, body, n1.CustodyPolicy())
	}
	code, body = post(t, n1.cfg.Addr, CustodyPolicyPath, Sign(n1.cfg.Secret, n1.target(), CustodyRequest{Custody: replica.CustodyMajority}))
	if code != 200 || body != `{"custody":"majority","was":"all"}`+"\n" {
		t.Fatalf("custody majority: %d %s", code, body)
	}
	for _, n := range nodes {
		waitFor(t, "the policy applied everywhere", 10*time.Second, func() bool { return n.CustodyPolicy() == replica.CustodyMajority })
	}
	if st, err := n1.Status(ctx); err != nil || st.Custody != replica.CustodyMajority {
		t.Fatalf("status: %v %q", err, st.Custody)
	}
	nodes[1].holdReceipts.Store(true)
	nodes[2].holdReceipts.Store(true)
	steps := proofOfWork()
	for _, st := range steps[:7] {
		if _, err := retried(func() (service.ClaimWritten, error) { return st.run(ctx, n1.Node, call) }); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	begin := steps[7]
	var ref *rest.Refusal
	waitFor(t, "node 1's receipt, the others' missing", 10*time.Second, func() bool {
		_, err := begin.run(ctx, n1.Node, call)
		if !errors.As(err, &ref) || ref.Code != service.CodeCustodyPending {
			t.Fatalf("begin with one receipt of three: %v", err)
		}
		var d struct {
			Missing []uint64 `json:"missing"`
		}
		json.Unmarshal(ref.Document, &d)
		return slices.Equal(d.Missing, []uint64{nodes[1].ID(), nodes[2].ID()})
	})
	if !strings.Contains(ref.Message, "no receipt yet from node(s) 2, 3 (custody majority: 2 of the 3 voters); nothing was proposed") {
		t.Fatalf("the refusal: %s", ref.Message)
	}
	nodes[1].holdReceipts.Store(false)
	got, err := retried(func() (service.ClaimWritten, error) { return begin.run(ctx, n1.Node, call) })
	if err != nil {
		t.Fatalf("begin with two receipts of three: %v", err)
	}
	if types := recordTypes(got); len(types) != 1 || types[0] != "claim.check.begin" {
		t.Fatalf("begin recorded %v", types)
	}
	shown, err := n1.Claim(ctx, call("", ""), "C17")
	if err != nil || len(shown.Custody) != 1 || !slices.Equal(shown.Custody[0].Missing, []uint64{nodes[2].ID()}) {
		t.Fatalf("custody shown: %v %+v", err, shown.Custody)
	}
}
