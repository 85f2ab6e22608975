package rest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"tally/api"
	"tally/auth"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

type ownRefusal struct{}

func (ownRefusal) Error() string { return "own" }
func (ownRefusal) Refusal() *Refusal {
	return NewRefusal(http.StatusServiceUnavailable, "unavailable", "own")
}

// Every error maps to one status, code and document, the same for the
// server's answer and the CLI's --json error; wrapping keeps the mapping.
func TestRefuseMapsEveryError(t *testing.T) {
	server := ReadRefusal(http.StatusForbidden, "403 Forbidden", []byte(`{"schema_version":1,"error":"no","code":"forbidden"}`+"\n"))
	for _, c := range []struct {
		err    error
		status int
		code   string
		msg    string
		usage  bool
	}{
		{refuse.Invalidf("until", "must be a time"), 400, "invalid", "until: must be a time", true},
		{refuse.NotFoundf("promise", "no promise with id x"), 404, "not_found", "promise: no promise with id x", false},
		{refuse.New(refuse.Conflict, "id", "taken"), 409, "conflict", "id: taken", false},
		{refuse.New(refuse.Forbidden, "by", "only the debtor"), 403, "forbidden", "by: only the debtor", false},
		{refuse.New(service.CodeNoSuchSession, "session", "none"), 404, "NoSuchSession", "session: none", false},
		{refuse.New(service.CodeSessionQuotaExceeded, "session", "full"), 429, "SessionQuotaExceeded", "session: full", false},
		{refuse.New("Damaged", "artifact", "bad bytes"), 500, "Damaged", "artifact: bad bytes", false},
		{&service.IdempotencyError{Code: service.CodeIdempotencyConflict, Key: "k"}, 409, "IdempotencyConflict", `request id "k" was already used for a different command`, false},
		{&service.IdempotencyError{Code: service.CodeRequestHistoryExpired, Key: "k"}, 410, "RequestHistoryExpired", "", false},
		{auth.ErrUnauthenticated, 401, "unauthenticated", auth.ErrUnauthenticated.Error(), false},
		{&http.MaxBytesError{Limit: 10}, 413, "invalid", "body: at most 10 bytes", true},
		{&store.CorruptError{Path: "log.jsonl", Line: 3, Reason: "chain"}, 500, "corrupt", "", false},
		{errors.New("disk on fire"), 500, "error", "disk on fire", false},
		{ownRefusal{}, 503, "unavailable", "own", false},
		{server, 403, "forbidden", "no", false},
	} {
		for _, err := range []error{c.err, fmt.Errorf("wrapped: %w", c.err)} {
			r := Refuse(err)
			if r.Status != c.status || r.Code != c.code || r.Usage() != c.usage {
				t.Errorf("%v: %d %s usage=%v, want %d %s usage=%v", err, r.Status, r.Code, r.Usage(), c.status, c.code, c.usage)
			}
			if c.msg != "" && err == c.err && r.Message != c.msg {
				t.Errorf("%v: message %q, want %q", err, r.Message, c.msg)
			}
			want := string(api.Error(r.Message, r.Code))
			if c.err == server {
				want = `{"schema_version":1,"error":"no","code":"forbidden"}` + "\n" // as the server sent it
			}
			if string(r.Document) != want {
				t.Errorf("%v: document %s, want %s", err, r.Document, want)
			}
		}
	}
	if r := ReadRefusal(502, "502 Bad Gateway", []byte("<html>")); r.Message != "server answered 502 Bad Gateway" || r.Code != "error" || r.Usage() {
		t.Errorf("a body that is no error document: %+v", r)
	}
	if r := NewRefusal(415, "UnsupportedMediaType", "m"); !r.Usage() {
		t.Error("415 is the caller's to fix")
	}
}
