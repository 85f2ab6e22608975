package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/digest"
	"tally/store"
)

// claimArgs splits a command line on spaces; an argument with spaces has
// ~ for them.
func claimArgs(line string) []string {
	f := strings.Fields(line)
	for i := range f {
		f[i] = strings.ReplaceAll(f[i], "~", " ")
	}
	return f
}

// damage is a step that overwrites the stored copy of content in each
// side's content store.
func damage(content string) parityStep {
	return parityStep{do: func(t *testing.T, side *paritySide) {
		t.Helper()
		cd := digest.HashContent([]byte(content)).String()
		path := filepath.Join(store.ObjectsDir(side.root), cd[:2], cd[2:])
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("tampered\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}}
}

// TestParityClaim: every claim verb and every refusal (a non-evaluator's
// verdict, a stranger's cancel, a wrong digest, a retried run, a damaged
// copy, …), on a local ledger and through a server (with tokens, and run
// with --insecure-dev), answers the same: exit code, stdout and stderr,
// --json documents and error documents included, byte for byte.
func TestParityClaim(t *testing.T) {
	const m, parser, outsider = "maintainer", "parser", "outsider"
	create := "claim create C1 --respondent parser --work reject~incomplete~escapes --check change/behavior:validator=command@1 " +
		"--check change/review:validator=review@1,phases=quality --deadline 2026-09-03T00:00:00Z"
	steps := []parityStep{
		// create, and its refusals
		{as: m, args: claimArgs(create), exit: ExitOK},
		{as: m, args: claimArgs(create + " --json"), exit: ExitError},                                            // the id is taken: conflict
		{as: m, args: claimArgs("claim create C9 --respondent parser --work w --check x/y:validator="), exit: 2}, // no validator
		{as: m, args: claimArgs("claim create -"), stdin: `{"claim":"C9","respondent":"parser","work":"w","bogus":1}`, exit: 2},
		{as: m, args: claimArgs("claim create - --json"), stdin: `{"claim":"C9","respondent":"parser","work":"w","bogus":1}`, exit: 2},
		{as: m, args: claimArgs("claim create C9 --respondent parser --work w --deadline soon --json"), exit: 2},
		{as: m, args: claimArgs("claim create C9 --respondent parser --work w --predecessor C99 --json"), exit: ExitError},
		// post, receipt, progress
		{as: parser, args: claimArgs("claim post C1 --json"), exit: ExitError}, // only the claimant posts
		{as: m, args: claimArgs("claim post C1"), exit: ExitOK},
		{as: m, args: claimArgs("claim post C1 --json"), exit: ExitError}, // posted already
		{as: outsider, args: claimArgs("receipt acquire C1 --json"), exit: ExitError},
		{as: parser, args: claimArgs("receipt acquire C1"), exit: ExitOK},
		{as: parser, args: claimArgs("progress C1 --generation 2 --note half --json"), exit: ExitError}, // a stale generation
		{as: parser, args: claimArgs("progress C1 --generation 1 --note half~way"), exit: ExitOK},
		{as: parser, args: claimArgs("progress C99 --generation 1 --note x --json"), exit: ExitError},
		// artifacts
		{as: parser, args: claimArgs("artifact put patch.txt --claim C1 --slot change --generation 1 --kind patch --id pa"), exit: ExitOK},
		{as: parser, args: claimArgs("artifact put patch2.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json"), exit: ExitOK},
		{as: parser, args: claimArgs("artifact put patch2.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json"), exit: ExitOK},   // a retry
		{as: parser, args: claimArgs("artifact put patch.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json"), exit: ExitError}, // other bytes
		{as: parser, args: claimArgs("artifact put missing.txt --claim C1 --id px"), exit: 2},
		{as: parser, args: claimArgs("artifact put patch.txt --claim C1 --slot nope --generation 1 --id px --json"), exit: ExitError},
		{as: outsider, args: claimArgs("artifact put patch.txt --claim C1 --slot change --generation 1 --id px --json"), exit: ExitError},
		{as: parser, args: claimArgs("artifact put patch.txt --id px"), exit: 2}, // no claim
		// testaments
		{as: parser, args: claimArgs("testament close C1 --id T1 --generation 1 --summary s --bind change=nope --json"), exit: ExitError},
		{as: parser, args: claimArgs("testament close C1 --id T1 --generation 1 --outcome complete --summary length~check~added --confidence 0.9 --bind change=pa"), exit: ExitOK},
		{as: parser, args: claimArgs("testament close C1 --id T2 --generation 1 --summary s --role x"), exit: 2},
		{as: m, args: claimArgs("testament post C1 T1 --json"), exit: ExitError}, // only its author posts it
		{as: parser, args: claimArgs("testament post C1 T1"), exit: ExitOK},
		{as: parser, args: claimArgs("testament receive C1 T1 --json"), exit: ExitError}, // only the claimant receives
		{as: m, args: claimArgs("testament receive C1 T1"), exit: ExitOK},
		{as: m, args: claimArgs("testament post C1"), exit: 2},
		{as: m, args: claimArgs("artifact receive C1 pa"), exit: ExitOK},
		{as: m, args: claimArgs("artifact receive C1 nope --json"), exit: ExitError},
		{as: m, args: claimArgs("artifact receive C1 pb --digest 0000 --json"), exit: 2},
		{as: m, args: claimArgs("artifact receive C1 pb --digest " + strings.Repeat("0", 64) + " --json"), exit: ExitError},
		// reads
		{as: m, args: claimArgs("claim show C1"), exit: ExitOK},
		{as: m, args: claimArgs("claim show C1 --json"), exit: ExitOK},
		{as: m, args: claimArgs("claim show C99 --json"), exit: ExitError},
		{as: m, args: claimArgs("claim show C1 --now 2026-09-04T00:00:00Z"), exit: ExitOK}, // overdue
		{as: m, args: claimArgs("claim ls"), exit: ExitOK},
		{as: m, args: claimArgs("claim ls --open --json"), exit: ExitOK},
		{as: m, args: claimArgs("claim ls --state Satisfied"), exit: ExitOK},
		{as: m, args: claimArgs("claim ls --participant parser --json"), exit: ExitOK},
		{as: m, args: claimArgs("claim graph"), exit: ExitOK},
		{as: m, args: claimArgs("artifact ls"), exit: ExitOK},
		{as: m, args: claimArgs("artifact ls --claim C1 --json"), exit: ExitOK},
		{as: m, args: claimArgs("artifact ls --claim C99 --json"), exit: ExitError},
		{as: m, args: claimArgs("artifact verify"), exit: ExitOK},
		{as: m, args: claimArgs("artifact verify pa --claim C1 --json"), exit: ExitOK},
		{as: m, args: claimArgs("artifact verify pa"), exit: 2},
		{as: m, args: claimArgs("artifact get pa --claim C1"), exit: ExitOK},
		{as: m, args: claimArgs("artifact get pa --claim C1 -o got.txt --json"), exit: ExitOK},
		{as: m, args: claimArgs("artifact get " + digest.HashContent([]byte("fixed escape\n")).String()), exit: ExitOK},
		{as: m, args: claimArgs("artifact get " + digest.HashContent([]byte("never stored\n")).String() + " -o x.txt --json"), exit: ExitError},
		{as: m, args: claimArgs("artifact get nope --claim C1 --json -o x.txt"), exit: ExitError},
		{as: m, args: claimArgs("artifact get pa"), exit: 2},
		// checks, and their refusals
		{as: parser, args: claimArgs("check begin behavior --claim C1 --artifact pa --json"), exit: ExitError}, // not the evaluator
		{as: m, args: claimArgs("check begin nocheck --claim C1 --artifact pa --json"), exit: ExitError},
		{as: m, args: claimArgs("check begin behavior --claim C1 --artifact nope --json"), exit: ExitError},
		{as: m, args: claimArgs("check begin behavior --claim C1"), exit: 2}, // no artifact
		{as: parser, args: claimArgs("check report review --claim C1 --artifact pa --result pass --evidence-file review.md --json"), exit: ExitError},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result great --evidence-file review.md --json"), exit: 2},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result pass --evidence-file missing.md"), exit: 2},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result pass"), exit: 2}, // no evidence
		{as: m, args: claimArgs("check report review --claim C99 --artifact pa --result pass --evidence e --json"), exit: ExitError},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --digest " + strings.Repeat("0", 64) + " --result pass --evidence-file review.md --json"), exit: ExitError}, // wrong digest
		{as: parser, args: claimArgs("check run behavior --claim C1 --artifact pa --command true --json"), exit: ExitError},
		{as: m, args: claimArgs("check run behavior --claim C1 --artifact pa"), exit: 2}, // the command validator needs --command
		{as: m, args: claimArgs("check run review --claim C1 --artifact pa"), exit: 2},   // a validator this tally cannot run
		{as: m, args: claimArgs("check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1"), exit: ExitOK},
		{as: m, args: claimArgs("check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1"), exit: ExitOK}, // a retry
		{as: m, args: claimArgs("check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1 --json"), exit: ExitOK},
		{as: m, args: claimArgs("check run behavior --claim C1 --artifact pa --command true --request-id run-1 --json"), exit: ExitError}, // another run
		{as: m, args: claimArgs("check begin review --claim C1 --artifact pa --request-id beg-1"), exit: ExitOK},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result pass --evidence-file review.md --note fine --request-id rep-1"), exit: ExitOK},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result pass --evidence-file review.md --note fine --request-id rep-1"), exit: ExitOK},
		{as: m, args: claimArgs("check report review --claim C1 --artifact pa --result fail --evidence-file review.md --note fine --request-id rep-1 --json"), exit: ExitError},
		{as: m, args: claimArgs("claim show C1"), exit: ExitOK},
		{as: m, args: claimArgs("claim graph --format dot"), exit: ExitOK},
		// the ends of a claim: cancel, revoke, supersede, post failed, declined
		{as: m, args: claimArgs("claim create C2 --respondent parser --work w --no-checks"), exit: ExitOK},
		{as: parser, args: claimArgs("claim cancel C2 --reason r --json"), exit: ExitError}, // a stranger to the claimant's verb
		{as: m, args: claimArgs("claim cancel C2 --reason not~needed"), exit: ExitOK},
		{as: m, args: claimArgs("claim cancel C2 --reason again --json"), exit: ExitError},
		{as: m, args: claimArgs("claim create C3 --respondent parser --work w --no-checks"), exit: ExitOK},
		{as: m, args: claimArgs("claim post C3"), exit: ExitOK},
		{as: parser, args: claimArgs("receipt acquire C3"), exit: ExitOK},
		{as: parser, args: claimArgs("receipt adopt C3 --holder p2 --json"), exit: ExitError},
		{as: m, args: claimArgs("receipt adopt C3 --holder p2 --reason parser~left"), exit: ExitOK},
		{as: parser, args: claimArgs("progress C3 --generation 1 --note stale --json"), exit: ExitError}, // the old holder
		{as: m, args: claimArgs("claim revoke C3 --reason slow"), exit: ExitOK},
		{as: m, args: claimArgs("claim create C4 --respondent parser --work w --check out/behavior:validator=command@1"), exit: ExitOK},
		{as: m, args: claimArgs("claim create C5 --predecessor C4 --respondent parser --work w2"), exit: ExitOK}, // inherits, says so
		{as: m, args: claimArgs("claim supersede C4 --successor C3 --json"), exit: ExitError},
		{as: m, args: claimArgs("claim supersede C4 --successor C5 --reason changed~terms"), exit: ExitOK},
		{as: m, args: claimArgs("claim post C5 --failed --reason no~queue"), exit: ExitOK},
		{as: m, args: claimArgs("claim create C6 --respondent parser --work w --no-checks --request-id c6"), exit: ExitOK},
		{as: m, args: claimArgs("claim create C6 --respondent parser --work w --no-checks --request-id c6 --json"), exit: ExitOK},
		{as: m, args: claimArgs("claim create C6 --respondent parser --work w2 --no-checks --request-id c6 --json"), exit: ExitError},
		{as: m, args: claimArgs("claim post -"), stdin: `{"claim":"C6"}`, exit: ExitOK},
		{as: parser, args: claimArgs("receipt acquire C6 --decline"), exit: 2}, // a decline needs a reason
		{as: parser, args: claimArgs("receipt acquire - --json"), stdin: `{"claim":"C6","decline":true,"reason":"busy"}`, exit: ExitOK},
		{as: m, args: claimArgs("testament close C1 --result --id R1 --summary behavior~passed --evidence " + evidenceID(m, "C1", "rep-1")), exit: ExitOK},
		{as: m, args: claimArgs("claim ls"), exit: ExitOK},
		{as: m, args: claimArgs("claim graph --format json"), exit: ExitOK},
		// a damaged stored copy is refused, never served
		damage("bounds checked\n"),
		{as: m, args: claimArgs("artifact verify --json"), exit: ExitError},
		{as: m, args: claimArgs("artifact get pb --claim C1 -o pb.txt --json"), exit: ExitError},
		{as: m, args: claimArgs("check begin behavior --claim C1 --artifact pb --json"), exit: ExitError},
	}
	files := map[string]string{"patch.txt": "fixed escape\n", "patch2.txt": "bounds checked\n", "review.md": "looks right\n"}
	tokens := map[string]string{m: "agent", parser: "agent", outsider: "agent", "p2": "agent"}
	runParity(t, []parityScenario{
		{name: "tokens", tokens: tokens, files: files, steps: steps},
		{name: "insecure-dev", files: files, steps: steps},
	})
}
