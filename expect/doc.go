// Package expect is the pure semantic core of tally's expectations family:
// an agent states what it expects to happen next and by when; a timekeeper (the
// timekeeper) notices the absences and commits them as lapses.
//
// The package does no I/O, starts no goroutines and never reads a clock: now
// is always an argument, so the same records and the same now give the same
// output. Its shape follows a pure state machine:
//
//   - Decode reads a log line into an Event; Event.Encode writes the exact
//     wire bytes back.
//   - State.Apply folds one record (with the log's Meta) into the state. It
//     never fails and ignores records that are malformed or contradict the
//     ledger.
//   - State.Decide validates a Command as of now and returns the records to
//     append, or a *rule.Refusal naming the field and the rule.
//   - State.Sweep returns what the timekeeper must commit at now:
//     withdrawals owed to ended origin tasks, then the lapses that fell due.
//   - State.Expectation, State.List and State.Lapses are the views.
//
// # Semantics
//
// An expectation is immutable once raised. dueAt and basis are required.
// It is satisfied by a fact whose factKey equals its satisfiedBy.factKey,
// exactly; nothing else satisfies it. A fact recorded before the
// expectation was raised satisfies it too (at the fact's time).
//
// Re-anchoring: when the expectation named by a step's anchor (or a newer
// expectation of its lineage) is satisfied at time T, the step's current due
// becomes T + offset; its projected due (dueAt as raised) is kept.
//
// Lapses, each committed by the timekeeper as a lapse record with id
// LapseID(expectationId, lapse, dueAt in force):
//
//   - overdue: current due + grace passed while the expectation was open;
//     once per due time in force (a re-anchored due may lapse again);
//   - skipped: a later step on the same subject (one whose after names this
//     expectation) was satisfied while this one was open; once;
//   - stalled: the horizon passed with no fact of any kind recorded on the
//     subject since the expectation was raised; once.
//
// A lapse falls due strictly after its instant, and only if the expectation
// was still open then: a satisfaction that came later does not undo it (the
// timekeeper may be late; the record is not). A lapse never changes the
// expectation's state. Withdrawal and supersession end an expectation: no
// lapse is recorded for it afterwards. When an origin task is cancelled or
// fails, every open expectation raised on it is withdrawn.
//
// More time only comes from a new expectation that supersedes the open one
// (same subject; by its raiser or a person), never identical in its terms
// to any ancestor. A lineage holds at most Config.LineageMax expectations
// unless a participant marked as a person extends it.
//
// # Records
//
// One JSON object per log line, "ts" (RFC 3339 UTC) and "type" first, the
// members below in this order, optional ones omitted when empty. The log's
// envelope member "tally" is skipped by Decode; other unknown members are
// kept in Event.Extra and written back by Encode. Record types and their
// members are stored in every ledger: do not rename them.
//
// expect.raise — an agent states an expectation. Members: expectationId,
// kind, subject{type,id}, expects?, satisfiedBy{factKey}, dueAt, grace?
// (ISO 8601), anchor{expectationId,offset}?, after[]?, horizon?, basis
// (observed|contract|declared), supersedes?, origin{taskId,contextId?}?,
// replyTo{url?,extension?,push?{url,token?}}? (where the timekeeper sends the
// lapses over A2A: the raising agent's endpoint or card URL, the extension
// URI, a push-notification config), by, human? (true when a person raised it):
//
//	{"ts":"2026-09-01T17:00:00Z","type":"expect.raise","expectationId":"exp-01J8Q0ARRIVE","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-2026-0901"},"expects":"an arrival event at DOH","satisfiedBy":{"factKey":"shipment.arrived:PA-2026-0901"},"dueAt":"2026-09-11T05:00:00Z","grace":"PT6H","anchor":{"expectationId":"exp-01J8Q0DEPART","offset":"PT1H45M"},"after":["exp-01J8Q0DEPART"],"horizon":"2026-09-13T05:00:00Z","basis":"observed","origin":{"taskId":"task-7","contextId":"ctx-3"},"by":"agent://booking"}
//
// expect.withdraw — an open expectation is withdrawn (by its raiser, a
// person, or the timekeeper when its origin task ended badly). Members:
// expectationId, by, reason?:
//
//	{"ts":"2026-09-02T08:00:00Z","type":"expect.withdraw","expectationId":"exp-01J8Q0ARRIVE","by":"watch","reason":"origin task cancelled"}
//
// fact — a key observed on a subject, by whoever observed it. Members:
// factKey, subject{type,id}, at (when it happened; defaults to ts), by?:
//
//	{"ts":"2026-09-11T04:10:00Z","type":"fact","factKey":"shipment.departed:PA-2026-0901","subject":{"type":"shipment","id":"PA-2026-0901"},"at":"2026-09-11T04:00:00Z","by":"carrier-feed"}
//
// lapse — the timekeeper commits a lapse; ts is when it was noticed. Apply
// folds it only when the log's appender (Meta.Actor) is the identity in "by":
// an imported or forged lapse stays in the log and changes nothing.
// Members: lapseId, expectationId, lapse (overdue|skipped|stalled), dueAt
// (the due time in force), lapsedAt (when the condition became true), by:
//
//	{"ts":"2026-09-12T09:00:00Z","type":"lapse","lapseId":"lps_1a0d995a16d1775e01d0a3f5","expectationId":"exp-01J8Q0ARRIVE","lapse":"overdue","dueAt":"2026-09-11T05:45:00Z","lapsedAt":"2026-09-11T11:45:00Z","by":"watch"}
//
// task.outcome — an origin task ended; cancelled and failed withdraw its
// open expectations. Members: taskId, outcome (completed|cancelled|failed),
// by?:
//
//	{"ts":"2026-09-02T08:00:00Z","type":"task.outcome","taskId":"task-7","outcome":"cancelled","by":"agent://booking"}
package expect
