package server

import (
	"tally/api"
	"tally/claim"
	"tally/expect"
	"tally/ledger"
	"tally/promise"
	"tally/vocab"
)

// The acting identity of a write under --insecure-dev (Config.Insecure).
//
// Without tokens a request names its identity in X-Tally-Actor. A request
// without it reads freely, and a write acts as the party its own record
// names as its author, so that a client which knows nothing of tally's
// headers (a stock A2A SDK) can try the ledger at once. A write whose
// record names no such party still needs the header. This is the one place
// that rule lives: every write route and the A2A binding ask writeActor.

// devPartiesText lists, for the card and the refusal, the records that
// name their own party.
const devPartiesText = "the debtor \"by\" of a promise declaration, the \"observer\" of an assessment, " +
	"the \"claimant\" of a new claim, the raiser \"by\" of an expectation"

// recordParty is the party a command's record names as its author; ""
// when it names none.
func recordParty(cmd ledger.Command) string {
	switch c := cmd.Promise.(type) {
	case promise.Declare:
		return c.By
	case promise.Assess:
		return c.Observer
	}
	switch c := cmd.Claim.(type) {
	case claim.Create:
		return c.Claimant
	}
	switch c := cmd.Expect.(type) {
	case expect.RaiseCommand:
		return c.Raise.By
	case expect.SupersedeCommand:
		return c.Raise.By
	}
	return ""
}

// partyOf is the command naming the party an api document names as its
// record's author, for writeActor: what recordParty reads of the record
// the document becomes.
func partyOf(d any) ledger.Command {
	switch d := d.(type) {
	case *api.PromiseDeclare:
		return ledger.Command{Promise: promise.Declare{By: d.By}}
	case *api.PromiseAssess:
		return ledger.Command{Promise: promise.Assess{Observer: d.Observer}}
	case *api.ClaimCreate:
		return ledger.Command{Claim: claim.Create{Claimant: d.Claimant}}
	case *api.ExpectRaise:
		return ledger.Command{Expect: expect.RaiseCommand{Raise: expect.Raise{By: d.By}}}
	}
	return ledger.Command{}
}

// writeActor is who a write acts as: the request's identity, or under
// --insecure-dev without one, the record's own party.
func (s *Server) writeActor(p principal, cmd ledger.Command) (string, error) {
	if p.actor != "" || !s.cfg.Insecure {
		return p.actor, nil
	}
	if party := recordParty(cmd); party != "" {
		return party, nil
	}
	return "", vocab.Invalidf("X-Tally-Actor", "--insecure-dev: this write names no party of its own ("+devPartiesText+
		" do); send the acting identity in the X-Tally-Actor header")
}

// claimParty is partyOf under the name the A2A binding calls it by.
func claimParty(d any) ledger.Command { return partyOf(d) }
