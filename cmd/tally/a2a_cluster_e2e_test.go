package main

// A2A against a cluster node: the binding runs through the node's Service,
// so a SendMessage is a replicated write and GetTask a linearizable read,
// with the answers `tally serve` gives.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// a2aRPC posts one JSON-RPC request to a node's session endpoint with ext
// activated (as actor, when given) and returns the HTTP status and the
// body.
func a2aRPC(t *testing.T, addr, ext, body string, actor ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/tenants/acme/sessions/s1/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Extensions", ext)
	for _, a := range actor {
		req.Header.Set("X-Tally-Actor", a)
	}
	return exchange(t, req)
}

func TestA2AClusterNodeSendMessageGetTask(t *testing.T) {
	n := newCNode(t, t.TempDir(), 1, "--bootstrap")
	n.start(t)
	waitUntil(t, "a leader in every group", 30*time.Second, func() bool {
		st, err := clusterStatus(n.addr)
		if err != nil || len(st.Groups) == 0 {
			return false
		}
		for _, g := range st.Groups {
			if g.Leader == 0 {
				return false
			}
		}
		return true
	})

	const ext = "urn:tally:ext:promise"
	send := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER",` +
		`"parts":[{"text":"a promise"}],"metadata":{"urn:tally:ext:promise":{"id":"p-1","promise":"review the draft","by":"alice","to":"bob","until":"2h"}}}}}`
	code, first := a2aRPC(t, n.addr, ext, send)
	var sent struct {
		Result struct {
			Task struct {
				ID        string `json:"id"`
				ContextID string `json:"contextId"`
				Status    struct {
					State string `json:"state"`
				} `json:"status"`
				Metadata map[string]json.RawMessage `json:"metadata"`
			} `json:"task"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(first), &sent); err != nil || code != 200 || sent.Error != nil {
		t.Fatalf("SendMessage: %d %s (%v)\n%s", code, first, err, n.log())
	}
	task := sent.Result.Task
	if task.ID != "p-1" || task.ContextID != "acme/s1" || task.Status.State != "TASK_STATE_WORKING" || !strings.Contains(string(task.Metadata[ext]), `"by":"alice"`) {
		t.Fatalf("SendMessage answered %s", first)
	}
	// The same message again is the recorded answer, not a second write.
	if code, again := a2aRPC(t, n.addr, ext, send); code != 200 || again != first {
		t.Fatalf("retry: %d\n%s\nwant\n%s", code, again, first)
	}

	code, got := a2aRPC(t, n.addr, ext, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"p-1"}}`)
	var shown struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &shown); err != nil || code != 200 || shown.Error != nil {
		t.Fatalf("GetTask: %d %s (%v)", code, got, err)
	}
	if shown.Result.ID != "p-1" || shown.Result.Status.State != "TASK_STATE_WORKING" || !strings.Contains(string(shown.Result.Metadata[ext]), `"promise":"review the draft"`) {
		t.Fatalf("GetTask answered %s", got)
	}
	code, list := a2aRPC(t, n.addr, ext, `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{}}`)
	if code != 200 || !strings.Contains(list, `"totalSize":1`) || !strings.Contains(list, `"id":"p-1"`) {
		t.Fatalf("ListTasks: %d %s", code, list)
	}
	// An expectation record runs through the Service too.
	const expectExt = "urn:tally:ext:expect"
	code, fact := a2aRPC(t, n.addr, expectExt, `{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"messageId":"m-2","role":"ROLE_USER",`+
		`"parts":[{"text":"a fact"}],"metadata":{"urn:tally:ext:expect":{"action":"fact","factKey":"k","subject":{"type":"t","id":"1"}}}}}}`, "carol")
	if code != 200 || strings.Contains(fact, `"error"`) || !strings.Contains(fact, `"factKey":"k"`) {
		t.Fatalf("expect record: %d %s", code, fact)
	}
	// An id no task has is not found.
	code, none := a2aRPC(t, n.addr, ext, `{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":"task-none"}}`)
	if code != 200 || !strings.Contains(none, `"code":-32001`) {
		t.Fatalf("GetTask of no task: %d %s", code, none)
	}
	code, raised := a2aRPC(t, n.addr, expectExt, `{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"message":{"messageId":"m-3","role":"ROLE_USER","taskId":"task-7",`+
		`"parts":[{"text":"an expectation"}],"metadata":{"urn:tally:ext:expect":{"expectationId":"e-1","kind":"doc.review","subject":{"type":"doc","id":"d1"},`+
		`"satisfiedBy":{"factKey":"k2"},"dueAt":"2030-01-01T00:00:00Z","basis":"declared","by":"carol"}}}}}`)
	if code != 200 || strings.Contains(raised, `"error"`) || !strings.Contains(raised, `"expectationId":"e-1"`) {
		t.Fatalf("raise: %d %s", code, raised)
	}
	// The origin's task is read through the Service: working while its
	// expectation is open.
	code, open := a2aRPC(t, n.addr, expectExt, `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"task-7"}}`)
	if code != 200 || strings.Contains(open, `"error"`) || !strings.Contains(open, `"state":"TASK_STATE_WORKING"`) || !strings.Contains(open, `"expectationId":"e-1"`) {
		t.Fatalf("GetTask of an open origin: %d %s", code, open)
	}
	// Cancelling the origin records its outcome through the Service,
	// withdrawing the expectation; GetTask then answers the same task.
	code, cancelled := a2aRPC(t, n.addr, expectExt, `{"jsonrpc":"2.0","id":8,"method":"CancelTask","params":{"id":"task-7"}}`, "carol")
	if code != 200 || !strings.Contains(cancelled, `"state":"TASK_STATE_CANCELED"`) || !strings.Contains(cancelled, `"state":"withdrawn"`) {
		t.Fatalf("CancelTask of an origin: %d %s", code, cancelled)
	}
	code, got = a2aRPC(t, n.addr, expectExt, `{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"task-7"}}`)
	if code != 200 || got != cancelled {
		t.Fatalf("GetTask of a cancelled origin: %d\n%s\nwant\n%s", code, got, cancelled)
	}
	// A claim's records run through the Service too, an artifact's bytes
	// (a raw file part) among them; its task is the claim's.
	const claimExt = "urn:tally:ext:claim"
	claimMsg := func(id int, who, rec string, parts string) {
		t.Helper()
		code, res := a2aRPC(t, n.addr, claimExt, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"c-%d","role":"ROLE_USER",`+
			`"parts":[%s],"metadata":{"urn:tally:ext:claim":%s}}}}`, id, id, parts, rec), who)
		if code != 200 || strings.Contains(res, `"error"`) {
			t.Fatalf("claim record %s: %d %s", rec, code, res)
		}
	}
	claimMsg(10, "carol", `{"claim":"C-1","respondent":"dave","work":"w","no_checks":true}`, `{"text":"a claim"}`)
	claimMsg(11, "carol", `{"action":"post","claim":"C-1"}`, `{"text":"post"}`)
	claimMsg(12, "dave", `{"action":"receipt.acquire","claim":"C-1"}`, `{"text":"mine"}`)
	raw := base64.StdEncoding.EncodeToString([]byte("the patch\n"))
	claimMsg(13, "dave", `{"action":"artifact.publish","claim":"C-1","artifact":"a-1","generation":1}`, `{"raw":"`+raw+`","filename":"fix.patch"}`)
	code, claimTask := a2aRPC(t, n.addr, claimExt, `{"jsonrpc":"2.0","id":14,"method":"GetTask","params":{"id":"C-1"}}`)
	if code != 200 || strings.Contains(claimTask, `"error"`) || !strings.Contains(claimTask, `"artifact":"a-1"`) {
		t.Fatalf("GetTask of a claim: %d %s", code, claimTask)
	}
}
