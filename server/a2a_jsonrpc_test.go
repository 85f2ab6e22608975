package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// errInfo is the ErrorInfo every JSON-RPC error object ends its data with.
func errInfo(reason string) string {
	return `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"` + reason + `"}`
}

// rpcErr is the exact answer to a refused request.
func rpcErr(id string, code int, msg, reason string, details ...string) string {
	data := append(details, errInfo(reason))
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + itoa(code) + `,"message":` + quote(msg) + `,"data":[` + strings.Join(data, ",") + `]}}` + "\n"
}

func invalidDetail(field, rule string) string {
	return `{"@type":"type.googleapis.com/google.protobuf.Struct","code":"invalid","field":` + quote(field) + `,"rule":` + quote(rule) + `}`
}

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestA2AJSONRPCEnvelope sends what careless and hostile clients send to
// the JSON-RPC endpoint: each answer is a JSON-RPC response object with the
// request's id (null when it could not be read) and the code the failure
// deserves, byte for byte, and appends nothing.
func TestA2AJSONRPCEnvelope(t *testing.T) {
	f := newFixture(t)
	promiseSend := `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"x"}],` +
		`"metadata":{"urn:tally:ext:promise":{"id":"p1","promise":"hand back a reviewed schema","to":"author","until":"2026-09-01T17:00:00Z"}}}}}`
	ext := []string{"A2A-Extensions", "urn:tally:ext:promise"}
	// The session exists (reads of one that does not are NoSuchSession).
	f.want(201, "POST", base+"/promises", "reviewer", `{"id":"setup","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`, "Content-Type", "application/json")
	// A session whose log is damaged: the server's fault, not the request's.
	if err := os.MkdirAll(filepath.Join(f.root, "sessions", "acme", "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.root, "sessions", "acme", "broken", "log.jsonl"), []byte("not a record\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateRule := `status: must be one of TASK_STATE_SUBMITTED, TASK_STATE_WORKING, TASK_STATE_COMPLETED, TASK_STATE_FAILED, TASK_STATE_CANCELED, TASK_STATE_REJECTED, TASK_STATE_INPUT_REQUIRED, TASK_STATE_AUTH_REQUIRED (got "DONE")`
	cases := []struct {
		name   string
		path   string
		body   string
		hdr    []string
		status int
		want   string
	}{
		{"syntax error", "", `{"jsonrpc":"2.0",`, nil, 200,
			rpcErr("null", -32700, "request: invalid JSON at byte offset 16 (line 1, column 17): unexpected end of JSON input", "PARSE_ERROR")},
		{"syntax error on line 2", "", "{\"jsonrpc\":\"2.0\",\n \"id\":1 \"method\":\"GetTask\"}", nil, 200,
			rpcErr("null", -32700, "request: invalid JSON at byte offset 26 (line 2, column 9): invalid character '\"' after object key:value pair", "PARSE_ERROR")},
		{"empty body", "", ``, nil, 200,
			rpcErr("null", -32700, "request: empty body: send a JSON-RPC request object", "PARSE_ERROR")},
		{"invalid UTF-8", "", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"a\xffb\"}}", nil, 200,
			rpcErr("null", -32700, "request: invalid UTF-8 at byte offset 60", "PARSE_ERROR")},
		{"a number", "", `5`, nil, 200,
			rpcErr("null", -32600, "request: must be a JSON-RPC request object", "INVALID_REQUEST")},
		{"null", "", `null`, nil, 200,
			rpcErr("null", -32600, "request: must be a JSON-RPC request object", "INVALID_REQUEST")},
		{"a batch", "", `[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]`, nil, 200,
			rpcErr("null", -32600, "request: batches are not supported: send one request object per HTTP request", "INVALID_REQUEST")},
		{"no jsonrpc", "", `{"id":1,"method":"GetTask","params":{"id":"x"}}`, nil, 200,
			rpcErr("1", -32600, `jsonrpc: required: "2.0"`, "INVALID_REQUEST")},
		{"jsonrpc 1.0", "", `{"jsonrpc":"1.0","id":"a","method":"GetTask","params":{"id":"x"}}`, nil, 200,
			rpcErr(`"a"`, -32600, `jsonrpc: must be "2.0"`, "INVALID_REQUEST")},
		{"no method", "", `{"jsonrpc":"2.0","id":7}`, nil, 200,
			rpcErr("7", -32600, "method: required: the name of an A2A method", "INVALID_REQUEST")},
		{"method not a string", "", `{"jsonrpc":"2.0","id":7,"method":3}`, nil, 200,
			rpcErr("7", -32600, "method: must be a non-empty string", "INVALID_REQUEST")},
		{"id an object", "", `{"jsonrpc":"2.0","id":{"n":1},"method":"GetTask"}`, nil, 200,
			rpcErr("null", -32600, "id: must be a string, a number or null", "INVALID_REQUEST")},
		{"unknown member", "", `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"x"},"extra":1}`, nil, 200,
			rpcErr("2", -32600, `request: unknown member "extra" (members: jsonrpc, method, params, id)`, "INVALID_REQUEST")},
		{"unknown method", "", `{"jsonrpc":"2.0","id":"q","method":"tasks/get","params":{"id":"x"}}`, nil, 200,
			rpcErr(`"q"`, -32601, `method: "tasks/get" is not an A2A 1.0 method (methods: CancelTask, CreateTaskPushNotificationConfig, DeleteTaskPushNotificationConfig, GetExtendedAgentCard, GetTask, GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs, ListTasks, SendMessage, SendStreamingMessage, SubscribeToTask)`, "METHOD_NOT_FOUND")},
		{"params an array", "", `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":["x"]}`, nil, 200,
			rpcErr("3", -32602, "params: must be an object", "INVALID_PARAMS")},
		{"params member of a wrong type", "", `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":5}}`, nil, 200,
			rpcErr("3", -32602, "params.id: must be a string (got number)", "INVALID_PARAMS", invalidDetail("params.id", "must be a string (got number)"))},
		{"nested member of a wrong type", "", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":4}}}`, nil, 200,
			rpcErr("3", -32602, "params.message.messageId: must be a string (got number)", "INVALID_PARAMS", invalidDetail("params.message.messageId", "must be a string (got number)"))},
		{"an unknown task state", "", `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"status":"DONE"}}`, nil, 200,
			rpcErr("3", -32602, stateRule, "INVALID_PARAMS", invalidDetail("status", stateRule[len("status: "):]))},
		{"an unknown role", "", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"BOSS","parts":[]}}}`, nil, 200,
			rpcErr("3", -32602, `message.role: must be ROLE_USER or ROLE_AGENT (got "BOSS")`, "INVALID_PARAMS", invalidDetail("message.role", `must be ROLE_USER or ROLE_AGENT (got "BOSS")`))},
		{"a required param missing", "", `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{}}`, nil, 200,
			rpcErr("3", -32602, "id: is required", "INVALID_PARAMS", invalidDetail("id", "is required"))},
		{"A2A-Version 9.9", "", promiseSend, append([]string{"A2A-Version", "9.9"}, ext...), 200,
			rpcErr("9", -32009, `A2A-Version: this server speaks A2A 1.0, not "9.9"`, "VERSION_NOT_SUPPORTED",
				`{"@type":"type.googleapis.com/google.protobuf.Struct","field":"A2A-Version","supportedVersions":["1.0"]}`)},
		{"A2A-Version 0.3", "", promiseSend, append([]string{"A2A-Version", "0.3"}, ext...), 200,
			rpcErr("9", -32009, `A2A-Version: this server speaks A2A 1.0, not "0.3"`, "VERSION_NOT_SUPPORTED",
				`{"@type":"type.googleapis.com/google.protobuf.Struct","field":"A2A-Version","supportedVersions":["1.0"]}`)},
		{"text/plain", "", promiseSend, append([]string{"Content-Type", "text/plain"}, ext...), 415,
			rpcErr("null", -32600, `Content-Type: must be application/json (got "text/plain")`, "INVALID_REQUEST")},
		{"form-encoded", "", promiseSend, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, ext...), 415,
			rpcErr("null", -32600, `Content-Type: must be application/json (got "application/x-www-form-urlencoded")`, "INVALID_REQUEST")},
		{"streaming", "", `{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":{}}`, nil, 200,
			rpcErr("4", -32004, "SendStreamingMessage: streaming is not offered (capabilities.streaming is false): use SendMessage, and the session's event stream (…/events) for what follows", "UNSUPPORTED_OPERATION")},
		{"subscribe", "", `{"jsonrpc":"2.0","id":4,"method":"SubscribeToTask","params":{"id":"x"}}`, nil, 200,
			rpcErr("4", -32004, "SubscribeToTask: streaming is not offered (capabilities.streaming is false): poll GetTask, or follow the session's event stream (…/events)", "UNSUPPORTED_OPERATION")},
		{"unknown task", "", `{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":"nope"}}`, nil, 200,
			rpcErr("5", -32001, "no task nope in session acme/main", "TASK_NOT_FOUND")},
		{"internal", "/v1/tenants/acme/sessions/broken/a2a", `{"jsonrpc":"2.0","id":6,"method":"GetTask","params":{"id":"x"}}`, nil, 200,
			rpcErr("6", -32603, "internal error: the server could not answer this request; its log has the cause", "INTERNAL_ERROR")},
	}
	before := string(f.logBytes())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if path == "" {
				path = a2aBase
			}
			code, body, h := f.do("POST", path, "reviewer", c.body, c.hdr...)
			if code != c.status || body != c.want || h.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s\nwant %d %s", code, body, c.status, c.want)
			}
		})
	}
	if after := string(f.logBytes()); after != before {
		t.Fatalf("a refusal appended:\n%s", after[len(before):])
	}

	// The versions tally speaks, and no header at all.
	for i, v := range []string{"1.0", "1", ""} {
		body := strings.Replace(strings.Replace(promiseSend, `"p1"`, `"p-v`+itoa(i)+`"`, 1), `"m-1"`, `"m-v`+itoa(i)+`"`, 1)
		hdr := ext
		if v != "" {
			hdr = append([]string{"A2A-Version", v}, ext...)
		}
		code, out, _ := f.do("POST", a2aBase, "reviewer", body, hdr...)
		if code != 200 || !strings.HasPrefix(out, `{"jsonrpc":"2.0","id":9,"result":{"task":{"id":"p-v`+itoa(i)+`"`) {
			t.Fatalf("A2A-Version %q: %d %s", v, code, out)
		}
	}

	// An authentication failure stays HTTP's: 401 with WWW-Authenticate.
	code, body, h := f.do("POST", a2aBase, "", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`)
	if code != 401 || h.Get("WWW-Authenticate") != `Bearer realm="tally"` || strings.Contains(body, "jsonrpc") {
		t.Fatalf("unauthenticated: %d %v %s", code, h, body)
	}

	// The errors are counted by code.
	_, metrics, _ := f.do("GET", "/metrics", "", "")
	for _, m := range []string{`tally_a2a_jsonrpc_errors_total{code="-32700"} 4`, `tally_a2a_jsonrpc_errors_total{code="-32600"} 11`,
		`tally_a2a_jsonrpc_errors_total{code="-32601"} 1`, `tally_a2a_jsonrpc_errors_total{code="-32602"} 6`,
		`tally_a2a_jsonrpc_errors_total{code="-32603"} 1`, `tally_a2a_jsonrpc_errors_total{code="-32009"} 2`,
		`tally_a2a_jsonrpc_errors_total{code="-32004"} 2`, `tally_a2a_jsonrpc_errors_total{code="-32001"} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}

// TestA2AJSONRPCTooLarge: a request over the body limit is 413 with a
// JSON-RPC error (not a parse error), and appends nothing.
func TestA2AJSONRPCTooLarge(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.BodyMax = 1024
	big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 2048) + `"}]}}}`
	code, body, _ := f.do("POST", a2aBase, "reviewer", big, "A2A-Extensions", "urn:tally:ext:promise")
	if want := rpcErr("null", -32600, "request: at most 1024 bytes", "INVALID_REQUEST"); code != 413 || body != want {
		t.Fatalf("got %d %s\nwant %s", code, body, want)
	}
	if len(f.logBytes()) != 0 {
		t.Fatalf("appended: %s", f.logBytes())
	}
}

// TestA2AJSONRPCNotification: a request without an id is executed and
// answered with no body.
func TestA2AJSONRPCNotification(t *testing.T) {
	f := newFixture(t)
	note := `{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"m-n","role":"ROLE_USER","parts":[{"text":"x"}],` +
		`"metadata":{"urn:tally:ext:promise":{"id":"pn","promise":"hand back a reviewed schema","to":"author","until":"2026-09-01T17:00:00Z"}}}}}`
	code, body, _ := f.do("POST", a2aBase, "reviewer", note, "A2A-Extensions", "urn:tally:ext:promise")
	if code != 204 || body != "" {
		t.Fatalf("notification: %d %q", code, body)
	}
	if !strings.Contains(string(f.logBytes()), `"type":"promise","id":"pn"`) {
		t.Fatalf("notification not executed: %s", f.logBytes())
	}
	// A failing notification is answered with nothing too.
	code, body, _ = f.do("POST", a2aBase, "reviewer", `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"nope"}}`)
	if code != 204 || body != "" {
		t.Fatalf("failing notification: %d %q", code, body)
	}
}

// TestA2APushConfigUnsupported: the four push-config methods answer
// -32003 alike, and the card does not claim push notifications.
func TestA2APushConfigUnsupported(t *testing.T) {
	f := newFixture(t)
	for _, m := range []string{"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"} {
		_, body, _ := f.do("POST", a2aBase, "reviewer", `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{"taskId":"t1","id":"c1","url":"https://agent.example/push"}}`)
		if want := rpcErr("1", -32003, "push notification not supported", "PUSH_NOTIFICATION_NOT_SUPPORTED"); body != want {
			t.Fatalf("%s: got %s\nwant %s", m, body, want)
		}
	}
	_, card, _ := f.do("GET", a2aBase+"/.well-known/agent-card.json", "", "")
	if !strings.Contains(card, `"pushNotifications":false`) {
		t.Fatalf("card: %s", card)
	}
}

// TestA2AJSONRPCBodyIncomplete: a body shorter than its Content-Length is
// the client's fault: 400 with a JSON-RPC error, not a parse error or 500.
func TestA2AJSONRPCBodyIncomplete(t *testing.T) {
	f := newFixture(t)
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n%s", a2aBase, f.tokens["reviewer"], body)
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if want := rpcErr("null", -32600, "request: the body ended early: unexpected EOF", "INVALID_REQUEST"); resp.StatusCode != 400 || string(got) != want {
		t.Fatalf("got %d %s\nwant %s", resp.StatusCode, got, want)
	}
}
