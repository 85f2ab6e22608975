package verbtest

import (
	"encoding/base64"

	"tally/verb"
)

// pinkiLine is a promise as pinki wrote it, for an import.
const pinkiLine = `{"ts":"2026-01-01T00:00:00Z","type":"promise","id":"pnk_000001","promise":"old","by":"carol","to":"dan","until":"2026-02-01T00:00:00Z"}` + "\n"

// C17 is the proof-of-work seed's claim: Behavior (a command) and Review
// (an agentic-only quality check), both the maintainer's, on the same
// change. Every binding's tests create it.
const C17 = `{"claim":"C17","respondent":"parser","work":"reject incomplete Unicode escapes",
 "scope":"string parser and its regression tests",
 "slots":[{"name":"change","mode":"required","checks":[
  {"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":2},
  {"id":"review","validator":{"name":"review","version":"1"},"evaluator":"maintainer","mode":"required","phases":["quality"],"attempts":1}]}]}`

// patch is C17's artifact's bytes; its content digest names it on the
// objects route.
const patch = "+\tif len(s) < 6 { return errIncomplete }\n"

// Script is the steps, in order: each family's story, every verb called
// with success and refused.
func Script() []Step {
	ok := func(v, actor, doc string, path ...string) Step {
		return Step{Verb: v, Actor: actor, Doc: doc, Path: path}
	}
	no := func(v, actor, doc string, path ...string) Step {
		return Step{Verb: v, Actor: actor, Doc: doc, Path: path, Refused: true}
	}
	bytesOf := func(s Step, body string) Step { s.Body = body; return s }
	return []Step{
		// Promises.
		ok(verb.PromiseDeclare, "alice", `{"id":"p1","promise":"ship the parser","by":"alice","to":"bob","until":"2030-01-01T00:00:00Z"}`),
		no(verb.PromiseDeclare, "alice", `{"id":"p1","promise":"ship it again","to":"bob","until":"2030-01-01T00:00:00Z"}`),
		ok(verb.PromiseDeclare, "alice", `{"id":"p2","promise":"review","to":"carol","until":"2030-01-02T00:00:00Z"}`),
		ok(verb.PromiseShow, "", `{"id":"p1"}`),
		no(verb.PromiseShow, "", `{"id":"nope"}`),
		ok(verb.PromiseList, "", `{"state":"all"}`),
		no(verb.PromiseList, "", `{"state":"bogus"}`),
		ok(verb.PromiseAmend, "alice", `{"id":"p1","until":"2030-02-01T00:00:00Z","reason":"later"}`),
		no(verb.PromiseAmend, "bob", `{"id":"p1","until":"2030-03-01T00:00:00Z"}`),
		ok(verb.PromiseAssess, "carol", `{"id":"p1","state":"violated","observer":"carol","note":"late"}`),
		no(verb.PromiseAssess, "carol", `{"id":"nope","state":"violated","observer":"carol"}`),
		ok(verb.PromiseOwed, "alice", `{}`),
		ok(verb.PromiseGraph, "", `{}`),
		ok(verb.PromiseResolve, "alice", `{"id":"p1","as":"satisfied","evidence":["https://example.com/pr/1"]}`),
		no(verb.PromiseResolve, "alice", `{"id":"p1","as":"cancelled","reason":"again"}`),
		ok(verb.WorkReady, "alice", `{"seat":"alice"}`),
		no(verb.WorkReady, "", `{}`),

		// Expectations.
		ok(verb.ExpectRaise, "agent", `{"expectationId":"e1","kind":"delivery","subject":{"type":"shipment","id":"s1"},"satisfiedBy":{"factKey":"shipped:s1"},"dueAt":"2030-01-01T00:00:00Z","basis":"declared","origin":{"taskId":"t1"}}`),
		no(verb.ExpectRaise, "agent", `{"expectationId":"e1","kind":"delivery","subject":{"type":"shipment","id":"s1"},"satisfiedBy":{"factKey":"shipped:s1"},"dueAt":"2030-01-01T00:00:00Z","basis":"declared"}`),
		ok(verb.ExpectRaise, "agent", `{"expectationId":"e3","kind":"delivery","subject":{"type":"shipment","id":"s3"},"satisfiedBy":{"factKey":"shipped:s3"},"dueAt":"2030-01-01T00:00:00Z","basis":"declared","origin":{"taskId":"t1"}}`),
		ok(verb.ExpectShow, "", `{"expectationId":"e1"}`),
		no(verb.ExpectShow, "", `{"expectationId":"nope"}`),
		ok(verb.ExpectList, "", `{}`),
		no(verb.ExpectList, "", `{"state":"bogus"}`),
		ok(verb.ExpectSupersede, "agent", `{"expectationId":"e2","dueAt":"2030-02-01T00:00:00Z"}`, "e1"),
		no(verb.ExpectSupersede, "agent", `{"expectationId":"e9","dueAt":"2030-02-01T00:00:00Z"}`, "nope"),
		ok(verb.ExpectFact, "feed", `{"factKey":"shipped:s1","subject":{"type":"shipment","id":"s1"}}`),
		no(verb.ExpectFact, "feed", `{"factKey":"","subject":{"type":"shipment","id":"s1"}}`),
		no(verb.ExpectWithdraw, "other", `{"reason":"not mine"}`, "e3"),
		ok(verb.ExpectTaskOutcome, "agent", `{"outcome":"cancelled"}`, "t1"),
		no(verb.ExpectTaskOutcome, "agent", `{"outcome":"bogus"}`, "t1"),
		ok(verb.ExpectTask, "", `{"taskId":"t1"}`),
		no(verb.ExpectTask, "", `{"taskId":"nope"}`),
		ok(verb.ExpectRaise, "agent", `{"expectationId":"e4","kind":"delivery","subject":{"type":"shipment","id":"s4"},"satisfiedBy":{"factKey":"shipped:s4"},"dueAt":"2029-01-01T00:00:00Z","basis":"declared"}`),
		ok(verb.ExpectWithdraw, "agent", `{"reason":"no longer needed"}`, "e4"),
		ok(verb.ExpectLapses, "", `{}`),
		no(verb.ExpectLapses, "", `{"since":"whenever"}`),
		ok(verb.ExpectRaise, "agent", `{"expectationId":"e5","kind":"delivery","subject":{"type":"shipment","id":"s5"},"satisfiedBy":{"factKey":"shipped:s5"},"dueAt":"2026-01-01T00:00:00Z","basis":"declared"}`),
		no(verb.ExpectLapse, "agent", `{"expectationId":"e5","lapse":"overdue"}`),
		ok(verb.ExpectLapse, "tally/timekeeper", `{"expectationId":"e5","lapse":"overdue"}`),

		// Claims.
		ok(verb.ClaimCreate, "maintainer", C17),
		no(verb.ClaimCreate, "maintainer", C17),
		ok(verb.ClaimShow, "", `{"claim":"C17"}`),
		no(verb.ClaimShow, "", `{"claim":"nope"}`),
		ok(verb.ClaimList, "", `{}`),
		no(verb.ClaimPost, "parser", `{"claim":"C17"}`),
		ok(verb.ClaimPost, "maintainer", `{"claim":"C17"}`),
		no(verb.ClaimReceipt, "maintainer", `{"claim":"C17"}`),
		ok(verb.ClaimReceipt, "parser", `{"claim":"C17"}`),
		ok(verb.ClaimProgress, "parser", `{"claim":"C17","generation":1,"note":"half way"}`),
		no(verb.ClaimProgress, "parser", `{"claim":"C17","generation":7,"note":"wrong generation"}`),
		bytesOf(ok(verb.ClaimArtifactPut, "parser", `{"claim":"C17","artifact":"patch-a","slot":"change","generation":1,"kind":"patch"}`), patch),
		bytesOf(no(verb.ClaimArtifactPut, "maintainer", `{"claim":"C17","artifact":"patch-x","slot":"change","generation":1,"kind":"patch"}`), patch),
		ok(verb.ClaimArtifactGet, "", `{"claim":"C17","artifact":"patch-a"}`),
		no(verb.ClaimArtifactGet, "", `{"claim":"C17","artifact":"nope"}`),
		ok(verb.ClaimArtifactVerify, "", `{"claim":"C17","artifact":"patch-a"}`),
		no(verb.ClaimArtifactVerify, "", `{"claim":"C17","artifact":"nope"}`),
		ok(verb.ArtifactList, "", `{}`),
		no(verb.ArtifactList, "", `{"artifact":"patch-a"}`),
		ok(verb.ArtifactContent, "", `{"content":"`+ContentOf(patch)+`"}`),
		no(verb.ArtifactContent, "", `{"content":"not-a-digest"}`),
		ok(verb.ClaimArtifactReceive, "maintainer", `{"claim":"C17","artifact":"patch-a"}`),
		no(verb.ClaimArtifactReceive, "maintainer", `{"claim":"C17","artifact":"nope"}`),
		ok(verb.ClaimTestamentClose, "parser", `{"claim":"C17","testament":"T1","generation":1,"outcome":"complete","summary":"length check","bindings":[{"slot":"change","artifact":"patch-a"}]}`),
		no(verb.ClaimTestamentClose, "maintainer", `{"claim":"C17","testament":"T2","generation":1,"outcome":"complete","summary":"not the holder"}`),
		no(verb.ClaimTestamentPost, "maintainer", `{"claim":"C17","testament":"T1"}`),
		ok(verb.ClaimTestamentPost, "parser", `{"claim":"C17","testament":"T1"}`),
		no(verb.ClaimTestamentReceive, "parser", `{"claim":"C17","testament":"T1"}`),
		ok(verb.ClaimTestamentReceive, "maintainer", `{"claim":"C17","testament":"T1"}`),
		ok(verb.ClaimCheckBegin, "maintainer", `{"claim":"C17","check":"behavior","artifact":"patch-a"}`),
		no(verb.ClaimCheckBegin, "parser", `{"claim":"C17","check":"review","artifact":"patch-a"}`),
		bytesOf(ok(verb.ClaimCheckEvidence, "maintainer", `{"check":{"claim":"C17","check":"behavior","artifact":"patch-a","result":"pass","evidence":"ev-1"},"name":"ev-1.log"}`), "behavior: pass\n"),
		bytesOf(no(verb.ClaimCheckEvidence, "parser", `{"check":{"claim":"C17","check":"review","artifact":"patch-a","result":"pass","evidence":"ev-2"},"name":"ev-2.log"}`), "review: pass\n"),
		no(verb.ClaimCheckReport, "parser", `{"claim":"C17","check":"review","artifact":"patch-a","result":"fail","evidence":"ev-1"}`),
		ok(verb.ClaimCheckReport, "maintainer", `{"claim":"C17","check":"review","artifact":"patch-a","result":"fail","evidence":"ev-1"}`),
		ok(verb.ClaimGraph, "", `{}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C18","respondent":"parser","work":"bounds checked","predecessor":"C17"}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C19","respondent":"parser","work":"another"}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C20","respondent":"parser","work":"and another"}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C21","respondent":"parser","work":"after C20","depends_on":["C20"],"no_checks":true}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C23","respondent":"parser","work":"bounds checked, again","predecessor":"C18"}`),
		ok(verb.ClaimPost, "maintainer", `{"claim":"C19"}`),
		ok(verb.ClaimReceipt, "parser", `{"claim":"C19"}`),
		no(verb.ClaimAdopt, "parser", `{"claim":"C19","holder":"helper"}`),
		ok(verb.ClaimAdopt, "maintainer", `{"claim":"C19","holder":"helper","reason":"parser is away"}`),
		no(verb.ClaimRevoke, "parser", `{"claim":"C19","reason":"not the claimant"}`),
		ok(verb.ClaimRevoke, "maintainer", `{"claim":"C19","reason":"taken back"}`),
		no(verb.ClaimCancel, "parser", `{"claim":"C20","reason":"not the claimant"}`),
		ok(verb.ClaimCancel, "maintainer", `{"claim":"C20","reason":"not needed"}`),
		no(verb.ClaimSupersede, "maintainer", `{"claim":"C17","successor":"nope"}`),
		ok(verb.ClaimSupersede, "maintainer", `{"claim":"C18","successor":"C23","reason":"a better fix"}`),
		no(verb.ClaimDeadline, "tally/timekeeper", `{"claim":"C18"}`),
		ok(verb.ClaimCreate, "maintainer", `{"claim":"C22","respondent":"parser","work":"late","deadline":"2026-01-01T00:00:00Z","no_checks":true}`),
		ok(verb.ClaimDeadline, "tally/timekeeper", `{"claim":"C22"}`),
		no(verb.ClaimDependency, "maintainer", `{"claim":"C18"}`),
		no(verb.ClaimDependency, "maintainer", `{"claim":"C21"}`),

		// The log.
		ok(verb.SessionVerify, "", `{}`),
		ok(verb.Verify, "", `{}`),
		ok(verb.SessionExport, "", `{"format":"pinki"}`),
		no(verb.SessionExport, "", `{"format":"bogus"}`),
		no(verb.SessionImport, "admin", `{"lines":"`+base64.StdEncoding.EncodeToString([]byte("not json\n"))+`"}`),
		ok(verb.SessionImport, "admin", `{"lines":"`+base64.StdEncoding.EncodeToString([]byte(pinkiLine))+`"}`),
	}
}
