package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"tally/api"
	"tally/client"
	"tally/expect"
	"tally/rest"
	"tally/server"
	"tally/service"
	"tally/store"
	"tally/verb/verbtest"
)

// Every verb of the table, called with success and refused, answers the
// same document and the same refusal code through a local Service, REST
// through the client to `tally serve`, a cluster node's Service, and REST
// through the client to a cluster node: a verb a binding lacks, or serves
// otherwise, fails here.
func TestEveryVerbThroughEveryBinding(t *testing.T) {
	local, _ := newDirLocal(t)
	want := verbtest.Run(t, verbtest.Of(local), 10*time.Second)
	verbtest.Check(t, want)

	// REST through the client to a server of its own ledger directory.
	sc := server.DefaultConfig()
	sc.Root, sc.Insecure = t.TempDir(), true
	if err := store.Init(sc.Root); err != nil {
		t.Fatal(err)
	}
	sc.Logger = nodeConfig(t, t.TempDir(), 1).Ledger.Logger
	srv, err := server.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	verbtest.Compare(t, "rest", want, verbtest.Run(t, verbtest.Of(restClient(t, ts.URL)), 10*time.Second))

	// A cluster node, called as a Service and through its REST routes.
	n := startAlone(t, t.TempDir())
	verbtest.Compare(t, "node", want, verbtest.Run(t, verbtest.Of(n.Node), 20*time.Second))

	cfg2 := nodeConfig(t, t.TempDir(), 1)
	cfg2.Bootstrap = true
	n2 := startNode(t, cfg2)
	defer n2.stop(t)
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n2.Node, 1) })
	verbtest.Compare(t, "node rest", want, verbtest.Run(t, verbtest.Of(restClient(t, "http://"+cfg2.Addr)), 20*time.Second))
}

// restClient is a client of the server at url run with --insecure-dev,
// whose requests as admin carry the admin role, as an admin's token
// would.
func restClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{URL: url, HTTP: &http.Client{Transport: adminRole{}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// adminRole gives a request acting as admin the admin role.
type adminRole struct{}

func (adminRole) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Tally-Actor") == "admin" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Tally-Role", "admin")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// expect.task answers on every node of a cluster: an origin task's
// expectations, raised through one node, read over REST from each, and
// an unknown task refused as a local ledger refuses it.
func TestExpectTaskOnEveryNode(t *testing.T) {
	nodes := startThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raise := api.ExpectRaise{ExpectationID: "e1", Kind: "delivery", Subject: &expect.Subject{Type: "shipment", ID: "s1"},
		SatisfiedBy: &api.FactKeyRef{FactKey: "shipped:s1"}, DueAt: "2030-01-01T00:00:00Z", Basis: "declared", Origin: &expect.Origin{TaskID: "t1"}}
	call := service.Call{Tenant: "acme", Session: "main", Actor: "agent"}
	if _, err := retried(func() (service.ExpectationWritten, error) { return nodes[0].RaiseExpectation(ctx, call, raise) }); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c := restClient(t, "http://"+n.cfg.Addr)
		got, err := retried(func() (service.TaskOriginShown, error) {
			return c.TaskOrigin(ctx, service.Call{Tenant: "acme", Session: "main"}, "t1")
		})
		if err != nil || got.Task.TaskID != "t1" || len(got.Task.Expectations) != 1 || got.Task.Expectations[0].ExpectationID != "e1" {
			t.Fatalf("node %d: %v %+v", n.ID(), err, got.Task)
		}
		_, err = c.TaskOrigin(ctx, service.Call{Tenant: "acme", Session: "main"}, "nope")
		if ref := rest.Refuse(err); err == nil || ref.Code != "not_found" {
			t.Fatalf("node %d: an unknown task: %v", n.ID(), err)
		}
	}
}
