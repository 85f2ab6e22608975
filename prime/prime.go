// Package prime renders the start-of-session context of a seat: what it
// owes, what is owed to it that is late, which claims wait on it (open, or
// failed and not yet answered), which expectations it raised lapsed or are
// past due, and which facts are expected of it, each with its ids and the
// commands to act. `tally prime`, `tally owed --format prime`, the MCP tool
// tally_prime and the MCP prompt resume_seat all print it, through any
// service.Service, so they print the same bytes. Two rules shape it:
//
//   - bounded: it fits in a number of tokens (at 4 bytes a token), dropping
//     the lowest-priority items first and saying how many it left out, and
//     where to see them;
//   - stable: the same ledger and now print the same bytes (every list is
//     sorted on ledger data, every relative time counts from now), so a
//     host can cache it.
//
// Every command it prints runs as printed in the seat's shell: it carries
// --session when the session is not the default and --as when the seat is
// not the identity the shell's environment gives (Commands).
package prime

import (
	"context"
	"strings"

	"tally/service"
)

// Limits of prime.
const (
	// TokensDefault is the default bound, about a screen of context.
	TokensDefault = 1500
	// BytesPerToken is the estimate the bound is counted in.
	BytesPerToken = 4
	// ClaimsMax is how many of the seat's open claims prime examines (in
	// priority order); the rest are counted as left out. Over TALLY_URL
	// each costs a request.
	ClaimsMax = 64
	// FailedMax is how many of the claims that failed, with the seat as
	// claimant or respondent, prime examines for a successor, newest
	// first; older ones are counted as not examined.
	FailedMax = 16
)

// Commands says what every printed command carries so that it runs as
// printed in the seat's shell.
type Commands struct {
	// Session is TENANT/SESSION when the session is not the default, else "".
	Session string
	// As is the seat when the shell's environment does not name it
	// (TALLY_ACTOR, or a token's identity), else "".
	As string
}

// Flags are the global flags of c, each followed by a space: "" when none.
func (c Commands) Flags() string {
	var b strings.Builder
	if c.Session != "" {
		b.WriteString("--session " + service.ShellWord(c.Session) + " ")
	}
	if c.As != "" {
		b.WriteString("--as " + service.ShellWord(c.As) + " ")
	}
	return b.String()
}

// Tally is the command line "tally FLAGS rest": rest as printed, run as c says.
func (c Commands) Tally(rest string) string { return "tally " + c.Flags() + rest }

// Text is the context of seat in c's session at c.Now, bounded to
// maxTokens, as `tally prime` prints it.
func Text(ctx context.Context, svc service.Service, c service.Call, seat string, cmds Commands, maxTokens int) (string, error) {
	d, err := Read(ctx, svc, c, seat)
	if err != nil {
		return "", err
	}
	p := Build(seat, c.Now, d, cmds)
	return p.Text(p.Fit(maxTokens * BytesPerToken)), nil
}

// The sections of prime, in the order they print. Stored in --json
// documents: do not rename.
const (
	SectionOwes     = "owes"
	SectionOwedLate = "owed_late"
	SectionClaims   = "claims"
	SectionLapsed   = "lapsed"
	SectionExpected = "expected"
)

// SectionOrder is the order the sections print in.
var SectionOrder = [...]string{SectionOwes, SectionOwedLate, SectionClaims, SectionLapsed, SectionExpected}
