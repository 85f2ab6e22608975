package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
)

// commitLapse commits d as the timekeeper through the Service a side's
// CLI gets (Local on the ledger directory, the client through the server
// with a timekeeper-role token): the one expectation write no verb makes.
func commitLapse(d api.ExpectLapse) func(t *testing.T, side *paritySide) {
	return func(t *testing.T, side *paritySide) {
		t.Helper()
		env := map[string]string{}
		for k, v := range side.env {
			env[k] = v
		}
		if tok, ok := side.tokens[timekeeperID]; ok {
			env["TALLY_TOKEN"] = tok
		}
		var out, errb bytes.Buffer
		st := testStreams(&out, &errb, env)
		st.Now = func() time.Time { return parityClock }
		g := &global{io: st}
		svc, err := g.service()
		if err != nil {
			t.Fatal(err)
		}
		if g.sessions != nil {
			defer g.sessions.close()
		}
		call, err := g.call(timekeeperID, "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CommitLapse(context.Background(), call, d); err != nil {
			t.Fatalf("%s: commit lapse: %v", side.name, err)
		}
	}
}

// expectTokens are the identities of the expectation scenarios: agents, a
// person (ops-lead, who gives --human) and the timekeeper.
var expectTokens = map[string]string{"booking": "agent", "carrier-feed": "agent", "stranger": "agent", "ops-lead": "person", timekeeperID: "timekeeper"}

// timekeeperID is the identity a timekeeper-role token acts as.
var timekeeperID = ledger.DefaultConfig().Timekeeper

// The expectation family, every verb and every refusal, locally and
// through a server, byte for byte: raise (flags and stdin), fact,
// supersede (inheritance, the lineage bound, a person past it), withdraw,
// task outcome, a lapse the timekeeper commits, and the reads.
func TestParityExpect(t *testing.T) {
	const booking, feed, lead, stranger = "booking", "carrier-feed", "ops-lead", "stranger"
	const sub = "--subject shipment:PA-1"
	doc := `{"expectationId":"exp-doc","kind":"shipment.customs","subject":{"type":"shipment","id":"PA-1"},` +
		`"satisfiedBy":{"factKey":"cleared:PA-1"},"dueAt":"2026-09-03T00:00:00Z","grace":"PT1H","basis":"contract","after":[]}`
	depart := "expect raise --id exp-depart --kind shipment.departure " + sub + " --fact-key departed:PA-1 --due 2026-09-02T03:15:00Z --grace 2h --basis observed --task task-7"
	runParity(t, []parityScenario{{name: "expectations", tokens: expectTokens, steps: []parityStep{
		// raise, and its refusals
		step(booking, ExitOK, claimArgs(depart)...),
		step(booking, ExitError, claimArgs(depart+" --json")...), // the id is taken
		step(booking, ExitOK, claimArgs("expect raise --id exp-arrive --kind shipment.arrival "+sub+" --expects an~arrival~at~DOH --fact-key arrived:PA-1 "+
			"--due 2026-09-02T05:00:00Z --grace PT6H --anchor exp-depart:1h45m --after exp-depart --horizon 3d --basis observed --task task-7 --context ctx-3 --json")...),
		{as: booking, args: claimArgs("expect raise - --json"), stdin: doc, exit: ExitOK},
		{as: booking, args: claimArgs("expect raise - --id exp-doc-2 --due 2h"), stdin: doc, exit: ExitOK}, // the flags given override the document
		step(booking, ExitOK, claimArgs("expect raise --id e-rel --kind k --subject doc:rel --fact-key done:rel --due 2h --basis declared --request-id rel-1")...),
		step(booking, ExitOK, claimArgs("expect raise --id e-rel --kind k --subject doc:rel --fact-key done:rel --due 2h --basis declared --request-id rel-1")...), // a retry
		step(booking, ExitOK, claimArgs("expect raise --id e-rel --kind k --subject doc:rel --fact-key done:rel --due 2h --basis declared --request-id rel-1 --json")...),
		step(booking, ExitError, claimArgs("expect raise --id e-rel --kind k --subject doc:rel --fact-key done:rel --due 3h --basis declared --request-id rel-1 --json")...), // another document
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --basis declared")...),                                                         // no due
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --basis declared --due soon --json")...),                                       // a bad due
		step(booking, ExitUsage, claimArgs("expect raise --id x --kind k --fact-key f --basis declared --due 2h")...),                                                        // no subject
		step(booking, ExitUsage, claimArgs("expect raise --id x --subject nocolon --kind k --fact-key f --basis declared --due 2h --json")...),                               // a bad subject
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --basis declared --due 2h --anchor nooffset")...),                              // a bad anchor
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --basis declared --due 2h --grace -1h --json")...),                             // a negative grace
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --due 2h --json")...),                                                          // no basis
		step(booking, ExitUsage, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --due 2h --basis guessed")...),                                                 // a bad basis
		step(booking, ExitError, claimArgs("expect raise --id x "+sub+" --kind k --fact-key f --due 2h --basis declared --after nope --json")...),                            // after names nothing
		{as: booking, args: claimArgs("expect raise - --json"), stdin: `{"expectationId":"x","colour":"red"}`, exit: ExitUsage},
		{as: booking, args: claimArgs("expect raise -"), stdin: `{"expectationId":"x","supersedes":"exp-depart"}`, exit: ExitUsage},
		{as: booking, args: claimArgs("expect raise -"), stdin: ``, exit: ExitUsage},
		step(booking, ExitUsage, claimArgs("expect raise extra")...),
		// facts
		step(feed, ExitOK, claimArgs("fact departed:PA-1 "+sub+" --at 2026-09-01T11:00:00Z")...),           // satisfies exp-depart, re-anchors exp-arrive
		step(feed, ExitUsage, claimArgs("fact departed:PA-1 "+sub+" --at 2026-09-02T00:00:00Z --json")...), // in the future
		step(feed, ExitUsage, claimArgs("fact departed:PA-1 --at 2026-09-01T11:00:00Z")...),                // no subject
		step(feed, ExitUsage, claimArgs("fact departed:PA-1 --subject nocolon")...),
		step(feed, ExitUsage, claimArgs("fact departed:PA-1 "+sub+" --at yesterday --json")...),
		step(feed, ExitOK, claimArgs("fact weighed:PA-1 "+sub+" --request-id f-1 --json")...),
		step(feed, ExitOK, claimArgs("fact weighed:PA-1 "+sub+" --request-id f-1")...), // a retry, in text
		step(feed, ExitError, claimArgs("fact weighed:PA-2 "+sub+" --request-id f-1 --json")...),
		// extensions: inheritance, the lineage bound, the person
		step(booking, ExitOK, claimArgs("expect supersede exp-arrive --id exp-arrive-2 --due 2026-09-02T08:00:00Z")...),
		step(booking, ExitError, claimArgs("expect supersede exp-arrive --id exp-arrive-3 --due 2026-09-02T09:00:00Z --json")...), // superseded, not open
		step(stranger, ExitError, claimArgs("expect supersede exp-arrive-2 --id exp-arrive-3 --due 2026-09-02T09:00:00Z --json")...),
		step(booking, ExitUsage, claimArgs("expect supersede nope --id n-2 --due 2026-09-02T09:00:00Z --json")...), // nothing to inherit: no basis
		{as: booking, args: claimArgs("expect supersede exp-arrive-2 - --json"), stdin: `{"supersedes":"exp-depart"}`, exit: ExitUsage},
		step(booking, ExitUsage, claimArgs("expect supersede exp-arrive-2 extra")...),
		step(booking, ExitOK, claimArgs("expect raise --id x1 --kind k --subject doc:x --fact-key done:x --due 2026-12-01T00:00:00Z --basis declared")...),
		step(booking, ExitOK, claimArgs("expect supersede x1 --id x2 --due 2026-12-02T00:00:00Z --request-id s-1")...),
		step(booking, ExitOK, claimArgs("expect supersede x1 --id x2 --due 2026-12-02T00:00:00Z --request-id s-1 --json")...), // a retry
		step(booking, ExitError, claimArgs("expect supersede x2 --id x3 --json")...),                                          // the same as its ancestor
		{as: booking, args: claimArgs("expect supersede x2 - --json"), stdin: `{"expectationId":"x3","dueAt":"2026-12-03T00:00:00Z","horizon":"2026-12-09T00:00:00Z"}`, exit: ExitOK},
		step(booking, ExitError, claimArgs("expect supersede x3 --id x4 --due 2026-12-04T00:00:00Z")...), // past the lineage bound
		step(booking, ExitError, claimArgs("expect supersede x3 --id x4 --due 2026-12-04T00:00:00Z --json")...),
		step(lead, ExitOK, claimArgs("expect supersede x3 --id x4 --due 2026-12-04T00:00:00Z --human --json")...),
		// withdrawals
		step(stranger, ExitError, claimArgs("expect withdraw exp-doc --json")...), // not the raiser
		step(booking, ExitError, claimArgs("expect withdraw nope")...),
		step(lead, ExitOK, claimArgs("expect withdraw exp-doc --reason customs~waived --human --request-id w-1")...), // a person withdraws another's
		step(lead, ExitOK, claimArgs("expect withdraw exp-doc --reason customs~waived --human --request-id w-1 --json")...),
		step(booking, ExitError, claimArgs("expect withdraw exp-doc --json")...),                                            // withdrawn already
		step(booking, ExitError, claimArgs("expect supersede exp-doc --id exp-doc-3 --due 2026-09-04T00:00:00Z --json")...), // a withdrawn one
		step(booking, ExitOK, claimArgs("expect raise --id h1 --kind k --subject doc:h --fact-key done:h --due 2026-09-01T10:00:00Z --horizon 2026-09-01T11:00:00Z --basis declared")...),
		step(booking, ExitUsage, claimArgs("expect supersede h1 --id h2 --due 2026-09-03T00:00:00Z --json")...), // its inherited horizon has passed
		step(booking, ExitOK, claimArgs("expect supersede h1 --id h2 --due 2026-09-03T00:00:00Z --horizon 2026-09-04T00:00:00Z --json")...),
		// task outcomes
		step(booking, ExitUsage, claimArgs("task outcome task-7")...),
		step(booking, ExitUsage, claimArgs("task outcome task-7 --cancelled --failed --json")...),
		step(booking, ExitOK, claimArgs("task outcome task-7 --cancelled --request-id t-1")...), // withdraws what task-7 still had open
		step(booking, ExitOK, claimArgs("task outcome task-7 --cancelled --request-id t-1 --json")...),
		step(booking, ExitError, claimArgs("task outcome task-7 --completed --json")...), // ended already
		step(booking, ExitOK, claimArgs("task outcome task-8 --completed --json")...),
		step(booking, ExitError, claimArgs("expect raise --id late-t "+sub+" --kind k --fact-key f --due 2h --basis declared --task task-7 --json")...),
		// a lapse the timekeeper commits, read back
		step(booking, ExitOK, claimArgs("expect raise --id late --kind k --subject doc:late --fact-key done:late --due 2026-09-01T10:00:00Z --basis declared")...),
		{do: commitLapse(api.ExpectLapse{ExpectationID: "late", Lapse: "overdue"})},
		{do: commitLapse(api.ExpectLapse{ExpectationID: "late", Lapse: "overdue"})}, // recorded already: nothing appended
		step(booking, ExitOK, claimArgs("lapses --json")...),
		step(booking, ExitOK, claimArgs("lapses")...),
		step(booking, ExitOK, claimArgs("lapses --expectation late --json")...),
		step(booking, ExitOK, claimArgs("lapses --expectation exp-depart")...),
		step(booking, ExitOK, claimArgs("lapses --since 2026-09-01T00:00:00Z")...),
		step(booking, ExitOK, claimArgs("lapses --since 1h --json")...),
		step(booking, ExitOK, claimArgs("lapses --since 2026-09-01T13:00:00Z --json")...),
		step(booking, ExitUsage, claimArgs("lapses --since yesterday --json")...),
		step(booking, ExitUsage, claimArgs("lapses extra")...),
		// reads
		step(booking, ExitOK, claimArgs("expect show exp-arrive")...),
		step(booking, ExitOK, claimArgs("expect show exp-arrive --json")...),
		step(booking, ExitOK, claimArgs("expect show exp-arrive-2")...),
		step(booking, ExitOK, claimArgs("expect show exp-depart --json")...),
		step(booking, ExitOK, claimArgs("expect show exp-doc")...),
		step(booking, ExitOK, claimArgs("expect show x4")...),
		step(booking, ExitOK, claimArgs("expect show h2 --json")...),
		step(booking, ExitOK, claimArgs("expect show late")...),
		step(booking, ExitError, claimArgs("expect show nope")...),
		step(booking, ExitError, claimArgs("expect show nope --json")...),
		step(booking, ExitUsage, claimArgs("expect show exp-arrive --now later")...),
		step(booking, ExitOK, claimArgs("expect ls")...),
		step(booking, ExitOK, claimArgs("expect ls --json")...),
		step(booking, ExitOK, claimArgs("expect ls --state open")...),
		step(booking, ExitOK, claimArgs("expect ls --state withdrawn --json")...),
		step(booking, ExitOK, claimArgs("expect ls --subject shipment:PA-1 --kind shipment.arrival")...),
		step(booking, ExitOK, claimArgs("expect ls --task task-7 --json")...),
		step(booking, ExitOK, claimArgs("expect ls --context ctx-3")...),
		step(booking, ExitUsage, claimArgs("expect ls --state lost")...),
		step(booking, ExitUsage, claimArgs("expect ls --subject nocolon --json")...),
	}}})
}

// Over TALLY_URL a person is a person-role token, so --human with another
// token (an agent's, the timekeeper's) is refused, exit 2 naming the rule,
// before anything is sent; a person-role token acts as a person without
// it. (Locally --human is the caller's word, so this has no local side.)
func TestExpectHumanNeedsAPersonToken(t *testing.T) {
	sc := parityScenario{name: "human", tokens: expectTokens}
	srv := remoteSide(t, sc, parityWork(t, sc))
	must := func(s parityStep) string {
		t.Helper()
		code, out, errb := srv.run(s)
		if code != s.exit {
			t.Fatalf("%q as %s: exit %d, want %d: %s%s", s.args, s.as, code, s.exit, out, errb)
		}
		return out + errb
	}
	must(step("booking", ExitOK, claimArgs("expect raise --id soon --kind k --subject doc:soon --fact-key f --due 2h --basis declared")...))
	for _, who := range []string{"booking", timekeeperID} {
		if got := must(step(who, ExitUsage, claimArgs("expect withdraw soon --human")...)); !strings.HasPrefix(got, "tally: human: over TALLY_URL a person is a token with role person, and this token acts as ") {
			t.Errorf("--human as %s: %q", who, got)
		}
		if got := must(step(who, ExitUsage, claimArgs("expect supersede soon --id later --due 3h --human --json")...)); !strings.HasPrefix(got, `{"schema_version":1,"error":"human: `) || !strings.Contains(got, `"code":"usage"`) {
			t.Errorf("--human --json as %s: %q", who, got)
		}
	}
	if got := must(step("booking", ExitOK, claimArgs("expect show soon")...)); !strings.HasPrefix(got, "soon  open") {
		t.Fatalf("a refused --human wrote: %s", got)
	}
	if got := must(step("ops-lead", ExitOK, claimArgs("expect withdraw soon --reason not~needed")...)); got != "soon: withdrawn\n" {
		t.Fatalf("a person-role token withdrawing another's: %q", got)
	}
}
