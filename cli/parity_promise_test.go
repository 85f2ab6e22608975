package cli

import (
	"testing"
	"time"
)

// The promise family and the log verbs, with every refusal, locally and
// through a server, byte for byte.
func TestParityPromise(t *testing.T) {
	const later = "--now=2026-09-01T15:30:00Z"
	tokens := map[string]string{"reviewer": "agent", "author": "agent", "observer": "agent", "boss": "admin"}
	declare := []string{"promise", "hand back a reviewed schema", "--id", "r1", "--to", "author", "--until", "2h"}
	runParity(t, []parityScenario{{
		name:   "life",
		tokens: tokens,
		steps: []parityStep{
			step("reviewer", ExitOK, declare...),
			step("reviewer", ExitOK, "promise", "ship it", "--id", "r2", "--to", "author", "--until", "2026-09-01T13:00:00Z", "--meta", `{"rung": 1}`, "--json"),
			step("reviewer", ExitOK, "promise", "after the review", "--id", "r3", "--to", "author", "--on", "r1", "--until", "5h", "--task", "task-9"),
			{as: "author", args: []string{"promise", "--id", "r4"}, stdin: `{"promise":"read it","to":"reviewer","until":"1d"}`},
			step("observer", ExitOK, "show", "r1", later),
			step("observer", ExitOK, "show", "r3", "--json", later),
			step("observer", ExitOK, "ls", later),
			step("observer", ExitOK, "ls", "--all", "--by", "reviewer", "--json", later),
			step("observer", ExitOK, "ls", "--overdue", later),
			step("reviewer", ExitOK, "amend", "r1", "--until", "3h", "--reason", "nudge 1"),
			step("reviewer", ExitOK, "amend", "r2", "--until", "2026-09-01T16:00:00Z", "--json"),
			step("reviewer", ExitOK, "owed", later),
			step("reviewer", ExitOK, "owed", "--json", later),
			step("author", ExitOK, "assess", "r2", "--violated", "--note", "late"),
			step("author", ExitOK, "assess", "r2", "--violated", "--json"),
			step("reviewer", ExitOK, "resolve", "r1", "--satisfied", "--evidence", "https://example.org/reviews/91"),
			step("author", ExitOK, "resolve", "r2", "--released", "--json"),
			step("reviewer", ExitOK, "resolve", "r3", "--cancelled", "--reason", "superseded"),
			step("observer", ExitOK, "graph", later),
			step("observer", ExitOK, "graph", "--format", "dot", later),
			step("observer", ExitOK, "graph", "--json", later),
			step("observer", ExitOK, "show", "r2", later),
			// A day later, without --now: the clock of both sides moved.
			{as: "observer", args: []string{"ls", "--all"}, at: parityClock.Add(24 * time.Hour)},
			{as: "reviewer", args: []string{"promise", "next", "--id", "r5", "--to", "author", "--until", "1h", "--json"}},
			step("observer", ExitOK, "export", later),
			step("observer", ExitOK, "export", "--format", "pinki"),
			step("observer", ExitOK, "export", "--format", "json", later),
			step("observer", ExitOK, "verify", "--session", "default/default"),
			step("observer", ExitOK, "verify", "--session", "default/default", "--json"),
			step("observer", ExitOK, "verify"),
			step("observer", ExitOK, "verify", "--json"),
		},
	}, {
		name:   "refusals",
		tokens: tokens,
		steps: []parityStep{
			step("reviewer", ExitOK, declare...),
			// A stranger amends, resolves as the debtor, assesses as another.
			step("author", ExitError, "amend", "r1", "--until", "3h"),
			step("author", ExitError, "amend", "r1", "--until", "3h", "--json"),
			step("observer", ExitError, "resolve", "r1", "--satisfied", "--evidence", "x"),
			step("observer", ExitError, "resolve", "r1", "--released", "--json"),
			step("author", ExitError, "assess", "r1", "--violated", "--observer", "observer"),
			// Bad documents.
			step("reviewer", ExitUsage, "amend", "r1", "--until", "whenever"),
			step("reviewer", ExitUsage, "amend", "r1", "--until", "whenever", "--json"),
			step("reviewer", ExitUsage, "promise", "x", "--id", "r9", "--to", "author", "--until", "soon"),
			step("reviewer", ExitUsage, "promise", "x", "--id", "r9", "--to", "author"),
			step("reviewer", ExitUsage, "promise", "x", "--id", "r9", "--to", "author", "--until", "2h", "--meta", "{not json"),
			step("reviewer", ExitUsage, "promise", "x", "--id", "r9", "--to", "author", "--until", "2h", "--meta", `[1]`, "--json"),
			step("reviewer", ExitUsage, "promise", "x", "--id", "bad id", "--to", "author", "--until", "2h"),
			step("reviewer", ExitError, "promise", "again", "--id", "r1", "--to", "author", "--until", "2h"),
			step("reviewer", ExitUsage, "resolve", "r1", "--satisfied"),
			step("reviewer", ExitUsage, "resolve", "r1", "--cancelled", "--json"),
			{as: "reviewer", args: []string{"promise"}, stdin: `{"promise":"x","to":"author","until":"2h","extra":1}`, exit: ExitUsage},
			{as: "reviewer", args: []string{"promise", "--json"}, stdin: `{"promise":`, exit: ExitUsage},
			// Promises that are not there.
			step("reviewer", ExitError, "amend", "nope", "--until", "3h"),
			step("observer", ExitError, "show", "nope"),
			step("observer", ExitError, "show", "nope", "--json"),
			step("observer", ExitUsage, "show", "r1", "--now", "yesterday"),
			// The CLI's own usage refusals, before anything is asked.
			step("", ExitUsage, "ls", "--open", "--all"),
			step("", ExitUsage, "export", "--format", "xml"),
			step("observer", ExitUsage, "graph", "--format", "svg"),
			step("reviewer", ExitUsage, "assess", "r1"),
			step("reviewer", ExitUsage, "promise", "x", "--to", "author", "--until", "2h", "--session", "nosession"),
		},
	}, {
		name:   "request ids",
		tokens: tokens,
		steps: []parityStep{
			step("reviewer", ExitOK, append(declare, "--request-id", "k1")...),
			// An exact retry prints the first answer, in either mode.
			step("reviewer", ExitOK, append(declare, "--request-id", "k1")...),
			step("reviewer", ExitOK, append(declare, "--request-id", "k1", "--json")...),
			// The same id for another document, or another verb.
			step("reviewer", ExitError, "promise", "other", "--id", "r1", "--to", "author", "--until", "2h", "--request-id", "k1"),
			step("reviewer", ExitError, "amend", "r1", "--until", "3h", "--request-id", "k1", "--json"),
			step("reviewer", ExitOK, "amend", "r1", "--until", "3h", "--request-id", "k2"),
			step("reviewer", ExitOK, "amend", "r1", "--until", "3h", "--request-id", "k2"),
			step("reviewer", ExitOK, "resolve", "r1", "--satisfied", "--evidence", "e1", "--request-id", "k3", "--json"),
			step("reviewer", ExitOK, "resolve", "r1", "--satisfied", "--evidence", "e1", "--request-id", "k3"),
			// Another identity's id is its own.
			step("author", ExitOK, "assess", "r1", "--violated", "--request-id", "k1"),
			step("author", ExitOK, "assess", "r1", "--violated", "--request-id", "k1"),
			step("reviewer", ExitUsage, append(declare, "--request-id", string(make([]byte, 257)))...),
			step("observer", ExitOK, "show", "r1", "--json"),
		},
	}, {
		name:   "import",
		tokens: tokens,
		files: map[string]string{
			"pinki.jsonl": `{"ts":"2026-09-01T10:00:00Z","type":"promise","id":"p1","promise":"old work","by":"reviewer","to":"author","until":"2026-09-02T10:00:00Z"}` + "\n" +
				`{"ts":"2026-09-01T10:05:00Z","type":"nudge","promise":"p1"}` + "\n" +
				`{"ts":"2026-09-01T11:00:00Z","type":"resolve","promise":"p1","as":"satisfied","evidence":["done"],"by":"reviewer"}` + "\n",
			"bad.jsonl": `{"ts":"2026-09-01T10:00:00Z","type":"promise","id":"q1","promise":"x","by":"reviewer","to":"author","until":"2026-09-02T10:00:00Z"}` + "\n" +
				`{"ts":"2026-09-01T10:00:00Z","type":"promise","id":"q2","by":"reviewer"}` + "\n",
			"broken.jsonl": "{not json\n",
		},
		steps: []parityStep{
			step("boss", ExitUsage, "import", "bad.jsonl"),
			step("boss", ExitUsage, "import", "broken.jsonl", "--json"),
			step("boss", ExitError, "import", "missing.jsonl"),
			{as: "boss", args: []string{"import", "-", "--json"}, stdin: `{"ts":"2026-09-01T11:30:00Z","type":"promise","id":"p2","promise":"more","by":"author","to":"reviewer","until":"2026-09-03T10:00:00Z"}` + "\n"},
			// From here the log holds a record tally does not fold: a local
			// process warns of it on opening the session, the server on an
			// export only, so the steps after are those that warn both ways.
			step("boss", ExitOK, "import", "pinki.jsonl"),
			step("observer", ExitOK, "export", "--format", "pinki"),
			step("observer", ExitOK, "verify", "--session", "default/default"),
		},
	}, {
		// Without tokens (--insecure-dev) a request names its identity,
		// and one that names none is refused as it is locally.
		name: "identities",
		steps: []parityStep{
			step("", ExitUsage, "promise", "x", "--id", "r1", "--to", "author", "--until", "2h"),
			step("", ExitUsage, "promise", "x", "--id", "r1", "--to", "author", "--until", "2h", "--json"),
			step("", ExitOK, "promise", "x", "--id", "r1", "--by", "reviewer", "--to", "author", "--until", "2h"),
			step("", ExitUsage, "amend", "r1", "--until", "3h"),
			step("author", ExitError, "amend", "r1", "--until", "3h"),
			step("reviewer", ExitOK, "amend", "r1", "--until", "3h"),
			step("", ExitOK, "assess", "r1", "--violated", "--observer", "author"),
			step("", ExitUsage, "owed"),
			step("reviewer", ExitOK, "owed"),
			step("", ExitOK, "show", "r1"),
		},
	}})
}
