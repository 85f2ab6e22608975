package cluster

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"tally/client"
	"tally/server"
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
	cfg := nodeConfig(t, t.TempDir(), 1)
	cfg.Bootstrap = true
	n := startNode(t, cfg)
	defer n.stop(t)
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n.Node, 1) })
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
