package cli

// The A2A verbs, as pinki has them: the AgentCard and a promise's A2A task,
// printed without a server (from the local ledger, with the server's own
// mapping), or fetched from TALLY_URL when it is set.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/spf13/cobra"

	"tally/a2atask"
	"tally/promise"
	"tally/refuse"
	"tally/service"
)

// defaultCardBase is where `tally serve` listens by default: the base URL an
// offline card advertises unless --url says otherwise.
const defaultCardBase = "http://127.0.0.1:7420"

func addA2ACommands(root *cobra.Command, g *global) {
	a := &cobra.Command{
		Use:   "a2a",
		Short: "A2A views: the AgentCard, a promise's task",
		Long: "a2a prints what tally's A2A binding serves, from the local ledger without a server:\n" +
			"the AgentCard of the session and the A2A task of a promise (the server's state mapping:\n" +
			"satisfied → COMPLETED with an evidence artifact, cancelled → REJECTED, released → CANCELED).\n" +
			"With TALLY_URL set (and TALLY_TOKEN), both are fetched from the server instead.",
		Args: cobra.NoArgs,
		// These verbs work locally and over TALLY_URL alike.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if g.remoteURL() != "" && g.dir != "" {
				return usagef("dir: --dir names a local ledger but TALLY_URL is set; give one of them")
			}
			return nil
		},
	}
	a.AddCommand(newA2ACard(g), newA2ATask(g))
	root.AddCommand(a)
}

func newA2ACard(g *global) *cobra.Command {
	var base string
	c := &cobra.Command{
		Use:   "card",
		Short: "Print the AgentCard of the session (JSON)",
		Long: "card prints the AgentCard `tally serve` serves for the session (--session, default default/default)\n" +
			"at …/a2a/.well-known/agent-card.json, its interfaces under --url. With TALLY_URL set it\n" +
			"fetches the card the server serves.",
		Example: "  tally a2a card\n  tally a2a card --url https://tally.example.org",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rc, err := g.remote()
			if err != nil {
				return err
			}
			if rc != nil {
				b, err := rc.do(c.Context(), "GET", rc.base+"/a2a/.well-known/agent-card.json", nil, "")
				if err != nil {
					return err
				}
				var card a2a.AgentCard
				if err := json.Unmarshal(b, &card); err != nil {
					return fmt.Errorf("server %s: the card is not JSON: %w", g.remoteURL(), err)
				}
				return printA2A(g.io.Out, &card)
			}
			tenant, session, err := g.target()
			if err != nil {
				return err
			}
			if _, err := g.sessionDir(); err != nil { // a card of a ledger that exists
				return err
			}
			u, err := url.Parse(base)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("url: %q is not an http or https base URL", base)
			}
			return printA2A(g.io.Out, a2atask.Card{URIs: a2atask.URIs{}.WithDefaults(), Base: strings.TrimRight(base, "/"), Tenant: tenant, Session: session, LapseDelivery: true}.AgentCard())
		},
	}
	c.Flags().StringVar(&base, "url", defaultCardBase, "the base URL the card's interfaces are under (the server's public URL)")
	return c
}

func newA2ATask(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "task ID",
		Short: "Print the A2A task of a promise or a claim",
		Long: "task prints the A2A task GetTask answers for a promise (by its task id or its promise id): its\n" +
			"state (owed → WORKING, conditional → SUBMITTED, satisfied → COMPLETED with an evidence artifact,\n" +
			"cancelled → REJECTED with the reason, released and expired → CANCELED), artifacts and the record\n" +
			"in metadata under the promise extension URI. An id no promise has is looked up as a claim id:\n" +
			"the claim's task (its states are mapped as docs/A2A.md's \"Claims over A2A\" table says), with the\n" +
			"claim's view under the claim extension URI. --json prints the task as JSON.",
		Example: "  tally a2a task pnk_1a2b3c\n  tally a2a task pnk_1a2b3c --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := g.a2aTask(c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printA2A(g.io.Out, t)
			}
			printTaskHuman(g.io.Out, t)
			return nil
		},
	}
	return c
}

// a2aTask is the task of id: from the server's REST GetTask with TALLY_URL
// set, else from the local ledger with the server's mapping.
func (g *global) a2aTask(ctx context.Context, id string) (*a2a.Task, error) {
	rc, err := g.remote()
	if err != nil {
		return nil, err
	}
	if rc != nil {
		b, err := rc.do(ctx, "GET", rc.base+"/a2a/rest/tasks/"+url.PathEscape(id), nil, "")
		if err != nil {
			return nil, err
		}
		var t a2a.Task
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, fmt.Errorf("server %s: the task is not JSON: %w", g.remoteURL(), err)
		}
		return &t, nil
	}
	svc, err := g.service()
	if err != nil {
		return nil, err
	}
	c, err := g.call("", "", time.Time{})
	if err != nil {
		return nil, err
	}
	c.Now = g.io.Now()
	// The mapping GetTask answers with, under the default extension URIs;
	// offline there is no server to fetch artifact bytes from, so a
	// claim's artifacts carry no URL.
	uris, contextID := a2atask.URIs{}.WithDefaults(), c.Tenant+"/"+c.Session
	var t *a2a.Task
	ps, err := svc.ListPromises(ctx, c, promise.Filter{State: "all", Task: id})
	if err != nil {
		return nil, err
	}
	if v, ok := a2atask.FindPromise(ps.Promises, id); ok {
		t = a2atask.PromiseTask(v, contextID, []string{uris.Promise})
	} else if cl, err := svc.Claim(ctx, c, id); err == nil {
		t = a2atask.ClaimTask(&cl.Claim, contextID, []string{uris.Claim}, "")
	} else if r, ok := refuse.As(err); !ok || r.Code != refuse.NotFound {
		return nil, err
	}
	if t == nil {
		return nil, refuse.NotFoundf("task", "no promise has task id "+strconv.Quote(id)+" and no claim has that id")
	}
	return t, nil
}

// printA2A prints an A2A object as indented JSON, as the wire has it.
func printA2A(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// printTaskHuman prints a task's id, context, state, status message,
// artifacts and the metadata keys its record rides under.
func printTaskHuman(w io.Writer, t *a2a.Task) {
	fmt.Fprintf(w, "task %s\n", t.ID)
	fmt.Fprintf(w, "  context   %s\n", t.ContextID)
	fmt.Fprintf(w, "  state     %s\n", t.Status.State)
	if t.Status.Timestamp != nil {
		fmt.Fprintf(w, "  since     %s\n", t.Status.Timestamp.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if m := t.Status.Message; m != nil {
		fmt.Fprintf(w, "  message   %s\n", partsText(m.Parts))
	}
	for _, a := range t.Artifacts {
		fmt.Fprintf(w, "  artifact  %s (%s): %s\n", a.Name, a.ID, partsText(a.Parts))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Metadata)) {
		fmt.Fprintf(w, "  metadata  %s\n", k)
	}
}

func partsText(ps a2a.ContentParts) string {
	var out []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		if s := p.Text(); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// a2aRemote is the session's URL on the server, for the A2A routes the
// a2a verbs read (the agent card, a task), which are no Service verb.
type a2aRemote struct {
	g    *global
	call service.Call
	base string // …/v1/tenants/T/sessions/S
}

// remote returns the session on the server when TALLY_URL is set, else nil.
func (g *global) remote() (*a2aRemote, error) {
	if g.remoteURL() == "" {
		return nil, nil
	}
	if _, err := g.service(); err != nil {
		return nil, err
	}
	c, err := g.call(g.actor(), "", time.Time{})
	if err != nil {
		return nil, err
	}
	return &a2aRemote{g: g, call: c, base: g.rest.SessionURL(c.Tenant, c.Session, nil)}, nil
}

// do sends one request with a JSON body (or none) and returns the body of a
// 2xx answer, or the server's refusal.
func (rc *a2aRemote) do(ctx context.Context, method, u string, body []byte, requestID string) ([]byte, error) {
	c := rc.call
	c.RequestID = requestID
	doc, err := rc.g.rest.Do(ctx, c, method, u, body)
	return doc.JSON, err
}
