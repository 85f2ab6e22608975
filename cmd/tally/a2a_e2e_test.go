package main

// `tally a2a card` and `tally a2a task`: the AgentCard and a promise's A2A
// task printed offline from a ledger, with the server's own mapping, and
// the same documents fetched from a running `tally serve` (TALLY_URL).

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// a2aTask decodes `tally a2a task ID --json`.
func a2aTask(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0: %v", r)
	}
	return decode(t, r.out)
}

func status(task map[string]any) (state, text string) {
	st, _ := task["status"].(map[string]any)
	state, _ = st["state"].(string)
	if m, ok := st["message"].(map[string]any); ok {
		if parts, ok := m["parts"].([]any); ok && len(parts) > 0 {
			text, _ = parts[0].(map[string]any)["text"].(string)
		}
	}
	return state, text
}

func TestE2EA2ATaskStates(t *testing.T) {
	l := newLedger(t)
	for _, id := range []string{"p-sat", "p-can", "p-rel", "p-owed"} {
		l.must("promise", "deliver "+id, "--id", id, "--by", "alice", "--to", "bob", "--until", "2h", "--as", "alice")
	}
	l.must("promise", "with a task", "--id", "p-task", "--task", "task-42", "--by", "alice", "--to", "bob", "--until", "2h", "--as", "alice")
	l.must("resolve", "p-sat", "--satisfied", "--evidence", "https://example.org/r/1", "--evidence", "sha256:abc", "--as", "alice")
	l.must("resolve", "p-can", "--cancelled", "--reason", "no longer needed", "--as", "alice")
	l.must("resolve", "p-rel", "--released", "--as", "bob")

	sat := a2aTask(t, l.run("a2a", "task", "p-sat", "--json"))
	if st, _ := status(sat); st != "TASK_STATE_COMPLETED" || sat["id"] != "p-sat" || sat["contextId"] != "default/default" {
		t.Fatalf("satisfied: %v", sat)
	}
	arts, _ := sat["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("satisfied: artifacts %v", sat["artifacts"])
	}
	parts, _ := arts[0].(map[string]any)["parts"].([]any)
	if len(parts) != 2 || parts[0].(map[string]any)["text"] != "https://example.org/r/1" || parts[1].(map[string]any)["text"] != "sha256:abc" {
		t.Fatalf("satisfied: artifact %v", arts[0])
	}
	meta, _ := sat["metadata"].(map[string]any)
	rec, _ := meta["urn:tally:ext:promise"].(map[string]any)
	if rec["id"] != "p-sat" || rec["state"] != "satisfied" || len(meta) != 1 {
		t.Fatalf("satisfied: metadata %v", meta)
	}
	if st, text := status(a2aTask(t, l.run("a2a", "task", "p-can", "--json"))); st != "TASK_STATE_REJECTED" || text != "no longer needed" {
		t.Fatalf("cancelled: %s %q", st, text)
	}
	rel := a2aTask(t, l.run("a2a", "task", "p-rel", "--json"))
	if st, _ := status(rel); st != "TASK_STATE_CANCELED" || rel["artifacts"] != nil {
		t.Fatalf("released: %v", rel)
	}
	if st, _ := status(a2aTask(t, l.run("a2a", "task", "p-owed", "--json"))); st != "TASK_STATE_WORKING" {
		t.Fatalf("owed: %s", st)
	}
	// A promise is found by its A2A task id too.
	if task := a2aTask(t, l.run("a2a", "task", "task-42", "--json")); task["id"] != "task-42" {
		t.Fatalf("by task id: %v", task)
	}
	// Text: the state, the artifact, the metadata key.
	out := l.must("a2a", "task", "p-sat")
	for _, want := range []string{"task p-sat", "TASK_STATE_COMPLETED", "artifact  evidence", "https://example.org/r/1", "metadata  urn:tally:ext:promise"} {
		if !strings.Contains(out, want) {
			t.Fatalf("text lacks %q:\n%s", want, out)
		}
	}
	if r := l.run("a2a", "task", "nope"); r.code == 0 || !strings.Contains(r.err, "nope") {
		t.Fatalf("unknown task: %v", r)
	}
	if r := l.run("a2a", "task"); r.code != 2 {
		t.Fatalf("no id: %v", r)
	}
}

// The card printed offline for the server's base URL is the card the
// server serves for the session, and so is the card fetched with TALLY_URL;
// a task read over TALLY_URL is the task read offline.
func TestE2EA2ACardAndTaskMatchServer(t *testing.T) {
	s := startServer(t, "alice", "bob")
	if r := s.as(t, "alice", "promise", "hand it back", "--id", "p-1", "--to", "bob", "--until", "2h"); r.code != 0 {
		t.Fatal(r)
	}
	if r := s.as(t, "bob", "resolve", "p-1", "--released", "--reason", "not needed"); r.code != 0 {
		t.Fatal(r)
	}
	offline := s.local(t, "a2a", "card", "--url", s.url)
	remote := s.as(t, "alice", "a2a", "card")
	if offline.code != 0 || remote.code != 0 {
		t.Fatalf("%v\n%v", offline, remote)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(offline.out), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(remote.out), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("offline card differs from the served one:\n%s\n%s", offline.out, remote.out)
	}
	ifs, _ := a["supportedInterfaces"].([]any)
	if len(ifs) != 2 || ifs[0].(map[string]any)["url"] != s.url+"/v1/tenants/default/sessions/default/a2a" {
		t.Fatalf("interfaces %v", a["supportedInterfaces"])
	}
	exts, _ := a["capabilities"].(map[string]any)["extensions"].([]any)
	if len(exts) != 3 {
		t.Fatalf("extensions %v", exts)
	}
	if r := s.local(t, "a2a", "card", "--url", "not a url"); r.code != 2 {
		t.Fatalf("bad --url: %v", r)
	}

	lt := a2aTask(t, s.local(t, "a2a", "task", "p-1", "--json"))
	rt := a2aTask(t, s.as(t, "alice", "a2a", "task", "p-1", "--json"))
	if st, text := status(lt); st != "TASK_STATE_CANCELED" || text != "not needed" {
		t.Fatalf("released: %s %q", st, text)
	}
	if !reflect.DeepEqual(lt, rt) {
		t.Fatalf("offline task differs from the served one:\n%v\n%v", lt, rt)
	}
	if r := s.as(t, "alice", "--dir", s.dir, "a2a", "card"); r.code != 2 {
		t.Fatalf("--dir with TALLY_URL: %v", r)
	}
}
