package cli

// The verbs that run through a server. With TALLY_URL set, the verbs below talk to
// `tally serve` instead of opening a ledger directory, and print exactly what
// they print locally (human and --json), with the same exit codes:
//
//   promise, amend, resolve, assess, show, ls, owed, graph;
//   export, import, verify;
//   claim create|post|cancel|revoke|supersede|show|ls|graph, receipt acquire|adopt,
//   progress, testament close|post|receive, artifact put|get|ls|verify|receive,
//   check begin|report|run;
//   expect raise|show|ls|withdraw|supersede, fact, task outcome, lapses.
//
// TALLY_TOKEN is the bearer token; the acting identity is the token's (asked
// of the server), and --as or TALLY_ACTOR, when given, must name the same
// identity (with a server run with --insecure-dev they name it; naming
// none, a write is refused as it is locally, or acts as the party its record
// names, --by or --observer, as the server lets it). --session
// TENANT/SESSION maps to the URL path (default default/default). --request-id
// becomes the Idempotency-Key header; a write to a cluster node given none
// gets one of the client's own, which the client sends again after an
// answer of unknown outcome and which the refusal names when its fate
// stays unknown (docs/CLUSTER.md). Refusals keep their meaning: HTTP 400,
// 413 and 415 exit 2, every other refusal exits 1, with the server's message
// on stderr (its error document as is with --json).
//
// The person role of the expectation verbs (--human locally) is the token's
// role remotely: the server treats a person-role token as a person whether
// or not --human is given, and the CLI refuses --human (exit 2) when the
// token's role is not person, rather than let it be quietly ignored. Against
// a server run with --insecure-dev, --human sends the person role with the
// acting identity. Relative times (--due 2h, --since 1d) are read against the
// client's clock; supersede inherits the terms it is not given from the
// server's view of OLD, as it does from the local ledger.
//
// Artifacts live in the server's content store. `artifact put` streams the
// file to it; `artifact get` downloads and checks the bytes against the
// recorded content digest before it writes anything (a mismatch is refused,
// exit 1); `artifact ls` reports whether the server holds each artifact's
// bytes, and `artifact verify` has the server re-hash its own stored copies
// (the custody that counts is the server's, and nothing is downloaded).
// `check run` fetches and checks the target, runs the validator on this
// machine, and records begin, the log as evidence, and the verdict through
// the server; `check report --evidence-file` uploads the file as evidence
// first, once the server has verified the target and the token's identity
// is the check's evaluator, so a refused report leaves no evidence behind.
// A verb that makes several requests sends --request-id as the key of the
// last and derives the others' from it (KEY/begin, KEY/evidence; the
// evidence id too), so a retry replays each step; a retried `check run`
// whose evidence the claim already records sends that evidence again
// instead of running the validator (locally alike). A claim's relative
// --deadline (2h) is read by the service that runs the verb: the server.
//
// The log itself: `export` (jsonl, pinki, json) streams the server's export
// of the session, acknowledged lines only; `verify` has the server verify its
// own log and prints its report, exit 0 only when whole, naming a damaged
// log by its path under the server's ledger directory; `import` sends the
// file's lines, and the server appends them all or none, for an admin-role
// token only (an import writes records as the parties they name). The CLI
// sends no key for an import to a single server (to a cluster node, the
// client's own); a client that sends one gets the recorded answer on a
// retry.
//
// token create|revoke|ls manage the server's tokens with an admin-role
// TALLY_TOKEN (of the tenant, or a cluster's first token, of every tenant).
//
// Every other verb works on a local ledger directory only (init, demo,
// serve and watch make or run a ledger directory or a server): with
// TALLY_URL set they refuse with exit 2, saying why,
// instead of quietly using a local ledger.

import (
	"strings"

	"github.com/spf13/cobra"
)

// remoteVerbs are the command paths that run against TALLY_URL.
var remoteVerbs = map[string]bool{
	"tally promise": true, "tally amend": true, "tally resolve": true, "tally assess": true,
	"tally show": true, "tally ls": true, "tally owed": true, "tally graph": true,
	"tally export": true, "tally import": true, "tally verify": true,
	"tally version": true, "tally help": true, "tally ready": true,
	"tally claim create": true, "tally claim post": true, "tally claim cancel": true, "tally claim revoke": true,
	"tally claim supersede": true, "tally claim show": true, "tally claim ls": true,
	"tally receipt acquire": true, "tally receipt adopt": true, "tally progress": true,
	"tally testament close": true, "tally testament post": true, "tally testament receive": true,
	"tally claim graph": true, "tally artifact put": true, "tally artifact get": true, "tally artifact ls": true,
	"tally artifact verify": true, "tally artifact receive": true, "tally check begin": true, "tally check report": true, "tally check run": true,
	"tally expect raise": true, "tally expect show": true, "tally expect ls": true, "tally expect withdraw": true,
	"tally expect supersede": true, "tally fact": true, "tally task outcome": true, "tally lapses": true,
	"tally prime":        true,
	"tally token create": true, "tally token revoke": true, "tally token ls": true,
}

// localOnly says why a verb that makes or runs a ledger directory or a
// server has no client form; "" for the others.
func localOnly(path string) string {
	switch {
	case path == "tally init":
		return "it makes a ledger directory; make a server's where the server runs"
	case path == "tally demo":
		return "it walks a promise, a claim and an expectation on a temporary ledger of its own"
	case path == "tally serve":
		return "it serves a ledger directory; run it where the directory is"
	case path == "tally watch":
		return "a server keeps its own time, every --watch-every; watch keeps a local ledger's"
	}
	return ""
}

// remoteURL is TALLY_URL without a trailing slash; "" means local.
func (g *global) remoteURL() string {
	return strings.TrimRight(strings.TrimSpace(g.io.Getenv("TALLY_URL")), "/")
}

// checkRemote refuses, with TALLY_URL set, a verb that only works locally.
func (g *global) checkRemote(c *cobra.Command) error {
	if g.remoteURL() == "" {
		return nil
	}
	path := c.CommandPath()
	// A command group only prints its help or refuses an unknown verb.
	if c.HasSubCommands() || strings.HasPrefix(path, "tally completion") {
		return nil
	}
	if !remoteVerbs[path] {
		verb := strings.TrimPrefix(path, "tally ")
		if why := localOnly(path); why != "" {
			return usagef("%s works on a local ledger directory only (%s); unset TALLY_URL to run it", verb, why)
		}
		return usagef("%s works on a local ledger directory only; unset TALLY_URL to run it", verb)
	}
	if g.dir != "" {
		return usagef("dir: --dir names a local ledger but TALLY_URL is set; give one of them")
	}
	return nil
}
