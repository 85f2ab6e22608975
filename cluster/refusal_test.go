package cluster

import (
	"errors"
	"testing"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/service"
)

// The cluster's retryable answers are error documents like the others
// (schema_version, error, code), with the group and where to go.
func TestRetryableDocuments(t *testing.T) {
	for _, c := range []struct {
		err  interface{ Refusal() *service.Refusal }
		want string
	}{
		{&Unavailable{Group: 3, Err: node.ErrNoLeader},
			`{"schema_version":1,"error":"group 3 unavailable at this node: node: the group has no known leader","code":"Unavailable","group":3}` + "\n"},
		{&Unavailable{Group: 2, Leader: 1, LeaderAddr: "10.0.0.1:7420", Err: errors.New("not the leader")},
			`{"schema_version":1,"error":"group 2 unavailable at this node: not the leader; its leader is node 1 at 10.0.0.1:7420","code":"Unavailable","group":2,"leader":1,"leader_addr":"10.0.0.1:7420"}` + "\n"},
		{&replica.Moved{Session: "acme/p", Group: 5, From: 4},
			`{"schema_version":1,"error":"session acme/p is placed in group 5; group 4 no longer takes its commands: retry","code":"Moved","group":5,"from_group":4}` + "\n"},
	} {
		ref := c.err.Refusal()
		if string(ref.Document) != c.want || ref.Status != 503 {
			t.Errorf("%d %s\nwant %s", ref.Status, ref.Document, c.want)
		}
	}
}
