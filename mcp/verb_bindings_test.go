package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/rest"
	"tally/service"
	"tally/verb"
	"tally/verb/verbtest"
)

// Every verb the table offers over MCP answers, through its tool and
// action, the document and refusal code the Service answers directly.
func TestEveryVerbThroughMCP(t *testing.T) {
	want := verbtest.Run(t, verbtest.Of(newFixture(t).svc), 10*time.Second)
	verbtest.Check(t, want)
	f := newFixture(t)
	clients := map[string]*sdk.ClientSession{}
	got := verbtest.Run(t, func(ctx context.Context, c verbtest.Call) (service.Doc, error) {
		args, ok, err := toolArguments(c)
		if !ok {
			// Not MCP's: the step runs on the Service all the same, so
			// the ledger the later steps read is the reference's.
			verbtest.Of(f.svc)(ctx, c)
			return service.Doc{}, verbtest.ErrNotOffered
		}
		if err != nil {
			return service.Doc{}, err
		}
		cs := clients[c.Call.Actor]
		if cs == nil {
			cs = f.client(c.Call.Actor)
			clients[c.Call.Actor] = cs
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.V.MCP.Tool, Arguments: args})
		if err != nil {
			return service.Doc{}, err
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if res.IsError {
			var e struct{ Code, Error string }
			if err := json.Unmarshal([]byte(text), &e); err != nil {
				return service.Doc{}, fmt.Errorf("%s: %s", c.Verb, text)
			}
			return service.Doc{}, &rest.Refusal{Code: e.Code, Message: e.Error}
		}
		return service.Doc{JSON: []byte(text)}, nil
	}, 10*time.Second)
	verbtest.Compare(t, "mcp", want, got)
}

// toolArguments are a step's arguments as its MCP tool takes them: the
// document's members (by the names the tool gives them), the session, the
// action, a write's request id or a read's now, and what REST carries in
// the path or the body (an expectation's id, bytes in base64). ok is false
// for a verb MCP does not offer, or offers answering another document (an
// artifact's bytes as a range).
func toolArguments(c verbtest.Call) (map[string]any, bool, error) {
	if c.V.MCP.Tool == "" || c.Verb == verb.ClaimArtifactGet {
		return nil, false, nil
	}
	args := map[string]any{}
	if c.Doc != "" {
		if err := json.Unmarshal([]byte(c.Doc), &args); err != nil {
			return nil, false, err
		}
	}
	args["session"] = c.Call.Tenant + "/" + c.Call.Session
	if c.V.MCP.Action != "" {
		args["action"] = c.V.MCP.Action
	}
	if c.V.Effect == verb.Read {
		args["now"] = c.Call.Now.Format(time.RFC3339)
	} else {
		args["request_id"] = c.Call.RequestID
	}
	switch c.Verb {
	case verb.PromiseResolve:
		args["resolution"] = args["as"]
		delete(args, "as")
	case verb.ExpectWithdraw:
		args["expectationId"] = c.Path[0]
	case verb.ExpectSupersede:
		args["supersedes"] = c.Path[0]
	case verb.ClaimArtifactPut:
		args["content_base64"] = base64.StdEncoding.EncodeToString([]byte(c.Body))
	}
	return args, true, nil
}
