package cluster

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"syscall"
	"testing"

	"tally/cluster/replica"
	"tally/rest"
)

// A member's addresses are HOST:PORT with a host and a port from 1 to
// 65535; a refusal names the field and the rule.
func TestCheckMember(t *testing.T) {
	ok := replica.Member{ID: 4, RaftAddr: "10.0.0.4:7421", Addr: "node4.example:7420"}
	for _, c := range []struct {
		m    func(m replica.Member) replica.Member
		want string
	}{
		{func(m replica.Member) replica.Member { return m }, ""},
		{func(m replica.Member) replica.Member { m.RaftAddr = "[::1]:7421"; return m }, ""},
		{func(m replica.Member) replica.Member { m.ID = 0; return m }, "member.id: required, not 0"},
		{func(m replica.Member) replica.Member { m.RaftAddr = ""; return m }, `member.raft_addr: "" is not HOST:PORT`},
		{func(m replica.Member) replica.Member { m.RaftAddr = "not an addr"; return m }, `member.raft_addr: "not an addr" is not HOST:PORT`},
		{func(m replica.Member) replica.Member { m.Addr = "::::"; return m }, `member.addr: "::::" is not HOST:PORT`},
		{func(m replica.Member) replica.Member { m.Addr = ":7420"; return m }, `member.addr: ":7420": the host must be a name or an IP address`},
		{func(m replica.Member) replica.Member { m.Addr = "a b:7420"; return m }, `member.addr: "a b:7420": the host must be a name or an IP address`},
		{func(m replica.Member) replica.Member { m.Addr = "h:0"; return m }, `member.addr: "h:0": the port must be a number from 1 to 65535`},
		{func(m replica.Member) replica.Member { m.Addr = "h:65536"; return m }, `member.addr: "h:65536": the port must be a number from 1 to 65535`},
		{func(m replica.Member) replica.Member { m.Addr = "h:http"; return m }, `member.addr: "h:http": the port must be a number from 1 to 65535`},
	} {
		m := c.m(ok)
		got := fmt.Sprint(CheckMember(m, "member."))
		if c.want == "" && got != "<nil>" || c.want != "" && got != c.want {
			t.Errorf("%+v: %s, want %q", m, got, c.want)
		}
	}
}

// A node that has not started answers every request with 503
// NodeStarting, why, its attempts and Retry-After; only a start that
// failed on the disk is tried again.
func TestStartingAnswersWhy(t *testing.T) {
	s := NewStarting(Config{NodeID: 3})
	s.why, s.attempts = fmt.Errorf("raftlog: /d/raft: 0 bytes free: %w", syscall.ENOSPC), 4
	rec := httptest.NewRecorder()
	rest.WriteRefusal(rec, s.Refusal())
	want := `{"schema_version":1,"error":"node 3 cannot start: raftlog: /d/raft: 0 bytes free: no space left on device","code":"NodeStarting","node_id":3,"attempts":4}` + "\n"
	if rec.Code != 503 || rec.Body.String() != want || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d %q %s\nwant 503 %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body, want)
	}
	for err, retried := range map[error]bool{
		fmt.Errorf("open: %w", syscall.ENOSPC): true, fmt.Errorf("write: %w", syscall.EIO): true,
		errors.New("join refused (403): WrongJoinSecret"): false, fmt.Errorf("%w", syscall.EACCES): false,
	} {
		if diskError(err) != retried {
			t.Errorf("%v: retried %v, want %v", err, !retried, retried)
		}
	}
}
