package server

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/a2atask"
	"tally/expect"
	"tally/instant"
	"tally/internal/poll"
	"tally/ledgerservice"
	"tally/timekeeper"
)

// raiseReplyTo raises id over A2A with its lapses replied to replyTo (a URL,
// or {"url","push":{…}}) and returns the JSON-RPC answer.
func (tf *timedFixture) raiseReplyTo(id string, due time.Time, replyTo any) rpcResponse {
	tf.t.Helper()
	rec := map[string]any{
		"expectationId": id, "kind": "doc.review", "subject": map[string]any{"type": "doc", "id": id},
		"satisfiedBy": map[string]any{"factKey": "done:" + id}, "dueAt": instant.Format(due), "basis": "declared",
		"replyTo": replyTo,
	}
	_, r, _ := tf.rpc("author", a2atask.ExpectationsDraftURI, "SendMessage", expectSend("m-"+id, "task-1", "ctx-1", a2atask.ExpectationsDraftURI, rec))
	return r
}

// outcome reads the session's watch journal afresh: what became of key.
func (tf *timedFixture) outcome(key string) (sent bool, outcome string) {
	tf.t.Helper()
	j, err := timekeeper.OpenJournal(filepath.Join(tf.root, "sessions", "acme", "main", ledgerservice.JournalDirName))
	if err != nil {
		tf.t.Fatal(err)
	}
	defer j.Close()
	return j.Sent(key), j.Outcome(key)
}

// failedSweeps reads the session's watch journal afresh: how many sweeps
// failed to deliver key so far.
func (tf *timedFixture) failedSweeps(key string) int {
	tf.t.Helper()
	j, err := timekeeper.OpenJournal(filepath.Join(tf.root, "sessions", "acme", "main", ledgerservice.JournalDirName))
	if err != nil {
		tf.t.Fatal(err)
	}
	defer j.Close()
	r, _ := j.Retry(key)
	return r.Sweeps
}

// sweptAgain waits until the built-in timekeeper of session (tenant/name)
// has completed a whole sweep begun after the call: the event that proves
// what a sweep at the clock the test set would do has been done. The first
// sweep to end after the call may have begun before it, at an earlier
// clock; the one that ends after it began after it ended.
func sweptAgain(t *testing.T, s *Server, session string) {
	t.Helper()
	lastEnd := func() time.Time {
		s.timekeepers.mu.Lock()
		defer s.timekeepers.mu.Unlock()
		return s.timekeepers.last[session]
	}
	mark := time.Now()
	var first time.Time
	waitFor(t, "a whole sweep of "+session, func() bool {
		end := lastEnd()
		if first.IsZero() {
			if end.After(mark) {
				first = end
			}
			return false
		}
		return end.After(first)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 5*time.Second, cond)
}

// By default (no allow-list) a replyTo on 127.0.0.1, localhost or a private
// address is refused at raise time, naming the field, and nothing is
// appended; a list that does not name the host refuses it too; a public
// name is accepted (it is judged again on its addresses at delivery).
func TestA2ALapseHostsRefusedAtRaise(t *testing.T) {
	tf := newTimedFixture(t, func(c *Config) { c.A2A.LapseHosts = nil })
	before := string(tf.logBytes())
	for _, rt := range []any{
		"http://127.0.0.1:9/rpc", "http://localhost:9/rpc", "http://10.0.0.8/rpc", "http://169.254.169.254/latest",
		map[string]any{"url": "https://agent.example.org/a2a", "push": map[string]any{"url": "http://[::1]:9/push"}},
	} {
		r := tf.raiseReplyTo("exp-x", t0.Add(time.Hour), rt)
		want := "replyTo.url: host not allowed"
		if m, ok := rt.(map[string]any); ok && m["push"] != nil {
			want = "replyTo.push.url: host not allowed"
		}
		if r.Error == nil || !strings.Contains(r.Error.Message, want) {
			t.Fatalf("%v: %s", rt, r.raw)
		}
	}
	if string(tf.logBytes()) != before {
		t.Fatal("a refused raise appended")
	}
	if r := tf.raiseReplyTo("exp-ok", t0.Add(time.Hour), "https://agent.example.org/a2a"); r.Error != nil {
		t.Fatalf("a public name refused: %s", r.raw)
	}

	listed := newTimedFixture(t, func(c *Config) { c.A2A.LapseHosts = []string{"agents.example.org", "*.fleet.example.org"} })
	if r := listed.raiseReplyTo("exp-1", t0.Add(time.Hour), "https://other.example.org/a2a"); r.Error == nil || !strings.Contains(r.Error.Message, "replyTo.url: host not allowed") {
		t.Fatalf("an unlisted host: %s", r.raw)
	}
	if r := listed.raiseReplyTo("exp-2", t0.Add(time.Hour), "https://a.fleet.example.org/a2a"); r.Error != nil {
		t.Fatalf("a listed host refused: %s", r.raw)
	}
}

// A target allowed when raised but refused when its lapse falls due (the
// server restarted with a narrower list) is never called: the lapse is
// journaled undeliverable and not retried.
func TestA2ALapseHostRefusedAtDelivery(t *testing.T) {
	tf := newTimedFixture(t)
	agent := newRaisingAgent(t, 0)
	due := t0.Add(time.Hour)
	if r := tf.raiseReplyTo("exp-1", due, agent.srv.URL+"/rpc"); r.Error != nil {
		t.Fatal(r.raw)
	}
	tf.tune = func(c *Config) { c.A2A.LapseHosts = []string{"agents.example.org"} }
	tf.start()
	tf.srv.session("acme", "main")
	tf.set(due.Add(time.Minute))
	key := string(expect.LapseID("exp-1", expect.LapseOverdue, due))
	waitFor(t, "the lapse journaled", func() bool { sent, _ := tf.outcome(key); return sent })
	if _, out := tf.outcome(key); out != timekeeper.OutcomeUndeliverable {
		t.Fatalf("outcome %q", out)
	}
	sweptAgain(t, tf.srv, "acme/main") // a later sweep calls it no more than the first
	if n := len(agent.calls()); n != 0 {
		t.Fatalf("%d calls to a refused target", n)
	}
}

// An agent that stays unreachable is given up after LapseGiveUpSweeps
// failed sweeps: journaled abandoned, and the timekeeper keeps sweeping.
func TestA2AUnreachableAgentAbandonedByServer(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/rpc"
	dead.Close()
	tf := newTimedFixture(t, func(c *Config) {
		c.A2A.LapseGiveUpSweeps = 2
		c.A2A.LapseAttempts = 1
		c.A2A.LapseSweepBackoff = time.Minute
	})
	due := t0.Add(time.Hour)
	if r := tf.raiseReplyTo("exp-1", due, deadURL); r.Error != nil {
		t.Fatal(r.raw)
	}
	key := string(expect.LapseID("exp-1", expect.LapseOverdue, due))
	tf.set(due.Add(time.Minute))
	// One failed sweep (journaled), then deferred by the backoff. Waited
	// for, not slept: a loaded machine may not sweep within a fixed pause,
	// and a first failure at the later clock below would be backed off
	// past it.
	waitFor(t, "the first failed sweep", func() bool { return tf.failedSweeps(key) == 1 })
	if sent, _ := tf.outcome(key); sent {
		t.Fatal("given up within the backoff")
	}
	tf.set(due.Add(5 * time.Minute))
	waitFor(t, "the lapse abandoned", func() bool { sent, _ := tf.outcome(key); return sent })
	if _, out := tf.outcome(key); out != timekeeper.OutcomeAbandoned {
		t.Fatalf("outcome %q", out)
	}
}
