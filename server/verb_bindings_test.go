package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tally/auth"
	"tally/rest"
	"tally/service"
	"tally/verb"
	"tally/verb/verbtest"
)

// Every verb the table offers over A2A, sent as its family's record,
// succeeds where the Service does and is refused with the Service's code
// where it refuses. A2A answers with a task, not the REST document, so
// only the outcome and the code are compared; the steps A2A does not
// offer run on the Service, so the ledger stays the reference's.
func TestEveryVerbThroughA2A(t *testing.T) {
	want := verbtest.Run(t, held(newFixture(t).srv), 10*time.Second)
	verbtest.Check(t, want)
	f := newFixture(t)
	f.srv.cfg.WatchEvery = 0
	for _, who := range []string{"alice", "bob", "carol", "agent", "feed", "other", "maintainer", "parser"} {
		f.token(who, auth.RoleAgent)
	}
	f.token("tally/timekeeper", auth.RoleTimekeeper)
	f.token("admin", auth.RoleAdmin)
	got := verbtest.Run(t, func(ctx context.Context, c verbtest.Call) (service.Doc, error) {
		if c.V.A2A == "" {
			held(f.srv)(ctx, c)
			return service.Doc{}, verbtest.ErrNotOffered
		}
		ext := "urn:tally:ext:" + c.V.Family
		rec := map[string]any{}
		if err := json.Unmarshal([]byte(c.Doc), &rec); err != nil {
			return service.Doc{}, err
		}
		rec["action"] = c.V.A2A
		switch c.Verb {
		case verb.ExpectWithdraw:
			rec["expectationId"] = c.Path[0]
		case verb.ExpectTaskOutcome:
			rec["taskId"] = c.Path[0]
		}
		p := sendParams(c.Call.RequestID, ext, rec)
		if c.Body != "" {
			p["message"].(map[string]any)["parts"] = []any{map[string]any{"raw": []byte(c.Body), "filename": "fix.patch"}}
		}
		status, r, _ := f.rpc(c.Call.Actor, ext, "SendMessage", p)
		if status != 200 { // refused before the binding: the error document
			var e struct{ Code, Error string }
			if err := json.Unmarshal([]byte(r.raw), &e); err != nil {
				return service.Doc{}, fmt.Errorf("%s: %d %s", c.Verb, status, r.raw)
			}
			return service.Doc{}, &rest.Refusal{Code: e.Code, Message: e.Error}
		}
		if r.Error == nil {
			return service.Doc{}, verbtest.ErrOtherDocument
		}
		var e struct {
			Error struct {
				Data []struct {
					Code string `json:"code"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.raw), &e); err != nil || len(e.Error.Data) == 0 {
			return service.Doc{}, fmt.Errorf("%s: %s", c.Verb, r.raw)
		}
		return service.Doc{}, &rest.Refusal{Code: e.Error.Data[0].Code, Message: r.Error.Message}
	}, 10*time.Second)
	verbtest.Compare(t, "a2a", want, got)
}

// held is the binding of the server's Service as its routes call it,
// each call holding the sessions it opens until it ends.
func held(s *Server) verbtest.Binding {
	return func(ctx context.Context, c verbtest.Call) (service.Doc, error) {
		ctx, release := s.withSessionHolds(ctx)
		defer release()
		return verbtest.Of(s.local)(ctx, c)
	}
}
