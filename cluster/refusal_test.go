package cluster

import (
	"errors"
	"testing"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/rest"
)

// The cluster's retryable answers are error documents like the others
// (schema_version, error, code), with the group and where to go, and a
// Retry-After. A write that may have committed says so, with its own code,
// and names its request id for the retry, or says it has none.
func TestRetryableDocuments(t *testing.T) {
	for _, c := range []struct {
		err  interface{ Refusal() *rest.Refusal }
		want string
	}{
		{&Unavailable{Group: 3, Err: node.ErrNoLeader},
			`{"schema_version":1,"error":"group 3 unavailable at this node: node: the group has no known leader","code":"Unavailable","group":3}` + "\n"},
		{&Unavailable{Group: 2, Leader: 1, LeaderAddr: "10.0.0.1:7420", Err: errors.New("not the leader")},
			`{"schema_version":1,"error":"group 2 unavailable at this node: not the leader; its leader is node 1 at 10.0.0.1:7420","code":"Unavailable","group":2,"leader":1,"leader_addr":"10.0.0.1:7420"}` + "\n"},
		{&Unavailable{Group: 2, Leader: 3, LeaderAddr: "10.0.0.3:7420", Err: node.ErrLeaderChanged, OutcomeUnknown: true, RequestID: "req-1"},
			`{"schema_version":1,"error":"group 2 did not answer the write at this node: node: the group's leader changed while the proposal waited; its leader is node 3 at 10.0.0.3:7420; the write may have committed: retry it with the same request id \"req-1\", which answers it from its record if it did","code":"UnknownOutcome","group":2,"leader":3,"leader_addr":"10.0.0.3:7420","request_id":"req-1"}` + "\n"},
		{&Unavailable{Group: 4, Err: node.ErrTimeout, OutcomeUnknown: true},
			`{"schema_version":1,"error":"group 4 did not answer the write at this node: node: timed out waiting for the group; the write may have committed; it carried no request id, so look whether it did before sending it again","code":"UnknownOutcome","group":4}` + "\n"},
		{&Unavailable{Group: 4, Err: node.ErrTimeout},
			`{"schema_version":1,"error":"group 4 unavailable at this node: node: timed out waiting for the group","code":"Unavailable","group":4}` + "\n"},
		{ErrStopped.(interface{ Refusal() *rest.Refusal }),
			`{"schema_version":1,"error":"cluster: node stopped","code":"Unavailable"}` + "\n"},
		{&replica.Moved{Session: "acme/p", Group: 5, From: 4},
			`{"schema_version":1,"error":"session acme/p is placed in group 5; group 4 no longer takes its commands: retry","code":"Moved","group":5,"from_group":4}` + "\n"},
	} {
		ref := c.err.Refusal()
		if string(ref.Document) != c.want || ref.Status != 503 || ref.RetryAfter != rest.RetryAfter {
			t.Errorf("%d %s\nwant %s", ref.Status, ref.Document, c.want)
		}
	}
}
