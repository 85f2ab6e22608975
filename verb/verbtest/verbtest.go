// Package verbtest walks the verb table through a binding: one script
// that calls every verb at least once with success and once refused, run
// through any binding (a Service, REST through the client, a cluster
// node, MCP, A2A), whose answers are compared with the same script's
// through a reference Service. Each binding's tests run it.
package verbtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/digest"
	"tally/rest"
	"tally/service"
	"tally/verb"
)

// Tenant and Session are where the script runs.
const Tenant, Session = "acme", "main"

// Step is one call of the script.
type Step struct {
	Verb  string
	Actor string
	// Doc is the request document (JSON), decoded strictly into the
	// verb's Request type.
	Doc string
	// Path are the path's arguments the document does not hold (an
	// expectation extended or withdrawn, a task).
	Path []string
	// Body is the bytes of a verb that takes bytes.
	Body string
	// Refused says the step is refused, by every binding with the same
	// code.
	Refused bool
}

// Call is one step as a binding gets it: the verb, its decoded document
// and path arguments, and the Call (tenant, session, actor, request id,
// the read's instant).
type Call struct {
	Step
	V    verb.Verb
	In   verb.Input
	Call service.Call
}

// Binding runs one call and answers its document or its refusal, or
// ErrNotOffered for a verb the binding does not offer (the table gives it
// no place there).
type Binding func(ctx context.Context, c Call) (service.Doc, error)

// ErrNotOffered is a binding's answer to a verb it does not offer.
var ErrNotOffered = errors.New("verbtest: the binding does not offer the verb")

// ErrOtherDocument is a binding's answer to a call that succeeded with
// a document of its own (A2A's task): only the success is compared.
var ErrOtherDocument = errors.New("verbtest: the binding answers another document")

// Of is the binding of a Service: the table's Call on it.
func Of(svc service.Service) Binding {
	return func(ctx context.Context, c Call) (service.Doc, error) {
		return c.V.Call(ctx, svc, c.Call, c.In)
	}
}

// Outcome is what one step answered: its document, normalized (the
// instants a binding stamps and the digests that cover them), or its
// refusal's code.
type Outcome struct {
	Step int
	Verb string
	Doc  string
	Code string
	Msg  string // the refusal's words: shown, not compared (a binding may name the field its way)
	// NotOffered says the binding does not offer the verb;
	// OtherDocument that it succeeded with a document of its own.
	NotOffered, OtherDocument bool
}

// readAt is the instant every read is computed at.
func readAt() time.Time { return time.Date(2029, 6, 1, 12, 0, 0, 0, time.UTC) }

// Run runs the script through b, each step under the bound d.
func Run(t testing.TB, b Binding, d time.Duration) []Outcome {
	t.Helper()
	var out []Outcome
	for i, s := range Script() {
		v, ok := verb.Lookup(s.Verb)
		if !ok {
			t.Fatalf("step %d: no verb %s", i, s.Verb)
		}
		in, err := input(v, s)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.Verb, err)
		}
		c := service.Call{Tenant: Tenant, Session: Session, Actor: s.Actor}
		if v.Effect == verb.Read {
			c.Now = readAt()
		} else {
			c.RequestID = fmt.Sprintf("step-%d", i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		doc, err := b(ctx, Call{Step: s, V: v, In: in, Call: c})
		// A refusal before anything was proposed (a cluster's
		// CustodyPending while the copies' receipts come in) is sent
		// again, as every client does, with the input made afresh.
		for err != nil && rest.Refuse(err).NotCommitted() && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if in, err = input(v, s); err != nil {
				t.Fatalf("step %d (%s): %v", i, s.Verb, err)
			}
			doc, err = b(ctx, Call{Step: s, V: v, In: in, Call: c})
		}
		cancel()
		o := Outcome{Step: i, Verb: s.Verb}
		switch {
		case errors.Is(err, ErrNotOffered):
			o.NotOffered = true
		case errors.Is(err, ErrOtherDocument):
			o.OtherDocument = true
		case err != nil:
			o.Code, o.Msg = rest.Refuse(err).Code, err.Error()
		default:
			o.Doc = normalize(doc.JSON)
		}
		out = append(out, o)
	}
	return out
}

// input is a step's Input: its document decoded into the verb's Request.
func input(v verb.Verb, s Step) (verb.Input, error) {
	in := verb.Input{Path: s.Path}
	if v.Request != nil {
		p := reflect.New(v.Request)
		doc := s.Doc
		if doc == "" {
			doc = "{}"
		}
		if err := api.Decode("step", []byte(doc), p.Interface()); err != nil {
			return in, err
		}
		in.Doc = p.Elem().Interface()
	}
	if s.Body != "" {
		in.Body = strings.NewReader(s.Body)
	}
	return in, nil
}

var (
	instants = regexp.MustCompile(`"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z"`)
	digests  = regexp.MustCompile(`"(sha256:|blake3:)?[0-9a-f]{64}"`)
	custody  = regexp.MustCompile(`,"custody":\[.*\]\}$`)
)

// normalize is a document with the instants a binding stamps (every
// instant not of the script's 2030s) and the digests that cover them
// replaced, so two bindings' answers compare by what the script decides.
func normalize(doc []byte) string {
	doc = bytes.TrimSpace(doc)
	// A cluster node's claim shows each artifact's custody (its last
	// member), which a single server, holding one verified copy, has not.
	doc = custody.ReplaceAll(doc, []byte("}"))
	doc = instants.ReplaceAllFunc(doc, func(b []byte) []byte {
		if bytes.HasPrefix(b, []byte(`"203`)) || bytes.HasPrefix(b, []byte(`"2029-06-01T12:00:00Z"`)) {
			return b
		}
		return []byte(`"INSTANT"`)
	})
	return string(digests.ReplaceAll(doc, []byte(`"DIGEST"`)))
}

// Compare reports each step where got's answer is not want's.
func Compare(t testing.TB, binding string, want, got []Outcome) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d outcomes, the reference %d", binding, len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.NotOffered || g.OtherDocument && w.Code == "" {
			continue
		}
		if w.Code != g.Code || w.Doc != g.Doc {
			t.Errorf("%s: step %d (%s): answered code %q (%s) %s\nthe reference: code %q (%s) %s", binding, i, w.Verb, g.Code, g.Msg, g.Doc, w.Code, w.Msg, w.Doc)
		}
	}
}

// Check reports each step whose reference outcome is not what the script
// says (a success, or a refusal), and each verb of the table the script
// does not call both ways (but for those that cannot be refused, and
// claim.dependency, which a story cannot make succeed: the failure that
// would let it commits its fact in its own batch, so it is there for a
// ledger that lacks the fact, one imported).
func Check(t testing.TB, want []Outcome) {
	t.Helper()
	ok, refused := map[string]bool{}, map[string]bool{}
	script := Script()
	for i, o := range want {
		if (o.Code != "") != script[i].Refused {
			t.Errorf("step %d (%s): code %q (%s) doc %s; the script says refused=%v", i, o.Verb, o.Code, o.Msg, o.Doc, script[i].Refused)
		}
		if o.Code == "" {
			ok[o.Verb] = true
		} else {
			refused[o.Verb] = true
		}
	}
	for _, v := range verb.Table() {
		if !ok[v.Name] && v.Name != verb.ClaimDependency {
			t.Errorf("verb %s: no step succeeds", v.Name)
		}
		if !refused[v.Name] && !unrefusable(v.Name) {
			t.Errorf("verb %s: no step is refused", v.Name)
		}
	}
}

// unrefusable says no request to a session that exists can make the verb
// called name refuse: it takes nothing that can be wrong.
func unrefusable(name string) bool {
	switch name {
	case verb.PromiseGraph, verb.PromiseOwed, verb.ClaimGraph, verb.ClaimList, verb.SessionVerify, verb.Verify:
		return true
	}
	return false
}

// ContentOf is the content digest of body, as the objects route names it.
func ContentOf(body string) string {
	h := digest.NewContentHasher()
	h.Write([]byte(body))
	return digest.ContentSum(h).String()
}
