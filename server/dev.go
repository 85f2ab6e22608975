package server

import (
	"tally/api"
	"tally/refuse"
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

// partyOf is the party an api document names as its record's author,
// for writeActor; "" when it names none.
func partyOf(d any) string {
	switch d := d.(type) {
	case *api.PromiseDeclare:
		return d.By
	case *api.PromiseAssess:
		return d.Observer
	case *api.ClaimCreate:
		return d.Claimant
	case *api.ExpectRaise:
		return d.By
	}
	return ""
}

// writeActor is who a write acts as: the request's identity, or under
// --insecure-dev without one, the record's own party (party).
func (s *Server) writeActor(p principal, party string) (string, error) {
	if p.actor != "" || !s.cfg.Insecure {
		return p.actor, nil
	}
	if party != "" {
		return party, nil
	}
	return "", refuse.Invalidf("X-Tally-Actor", "--insecure-dev: this write names no party of its own ("+devPartiesText+
		" do); send the acting identity in the X-Tally-Actor header")
}

// claimParty is partyOf under the name the A2A binding calls it by.
func claimParty(d any) string { return partyOf(d) }
