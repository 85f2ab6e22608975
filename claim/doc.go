// Package claim is the pure semantic core of tally's claims family: the
// proof-of-work ledger. A claim fixes what is owed (slots, checks,
// evaluators); a respondent takes an execution receipt, publishes artifacts
// and closes testaments; designated evaluators report verdicts bound to one
// artifact id and digest; and the ledger derives acceptance. Nobody asserts
// "done".
//
// The package does no I/O, reads no clock and starts no goroutines. Like
// etcd's raft it is a state machine driven by its caller:
//
//	s := claim.NewStateConfig(cfg)
//	for each committed line:   e, err := claim.Decode(line); s.Apply(meta, e)
//	for a command:             events, err := s.Decide(actor, now, cmd)
//	                           append events atomically (e.Encode()), then Apply each
//	for a read:                v, ok := s.Claim(id, now); s.List(filter, now)
//
// # Rules in one place
//
// State.validate holds every rule that depends on the state or the actor;
// Decide refuses (a *rule.Refusal) what it rejects, and Apply skips it
// (reported by State.Ignored) so that a record written by another tool can
// never corrupt the fold. Terminal states absorb; after the end only audit
// records are kept (the verdict of a check already running, Observe checks,
// result artifacts, the result testament), unless cancel, revoke or
// supersede fenced the evaluators.
//
// # Acceptance
//
// A slot's witness is one target (artifact id + digest) bound to the slot in
// a received response on which every Required check of the slot passed, all
// phases. A claim succeeds locally when every Required slot has a witness and
// the implicit delivery check passed (the claimant received a closing
// testament). Different slots may have witnesses from different work cycles.
// A Required slot without a witness that gets a committed cause (a received
// response missing it; a Required check concluded fail, incomplete, or
// errored after every attempt and fallback) ends the claim at once:
// ValidationIncomplete, ValidationFailed or ValidationErrored, decided by the
// first such slot in declaration order and its earliest cause. A later work
// cycle never heals that failure; correct it with a successor claim. Observe
// slots and Observe checks never delay or fail acceptance.
//
// Satisfied = local success ∧ every DependsOn target Satisfied ∧ every Awaits
// target terminal, grown as a least fixpoint from false over the claims an
// event can affect (dependents are indexed), so a cycle never satisfies
// itself and the cost of a verdict does not grow with the ledger.
//
// # Explanations
//
// A view says why its claim is not Satisfied (View.Why, Reason): how it
// ended, the delivery it waits on, each Required slot without a witness
// with every candidate's gating checks (passed, running, missing, failed),
// and each blocking relation that does not hold, followed down to the claim
// that lacks something itself or named as a cycle back to the claim. The
// texts are the ones claim show prints, REST answers and A2A status
// messages carry. A terminal claim's slots and reasons are as of its end.
//
// # Scope release
//
// A terminal claim still answers for the work it started: it releases its
// scope only when its waits are settled or cancelled and every child
// released its own (the seed's migration, stopped while child work and a
// wait are outstanding). Here a claim's waits are its Awaits targets,
// settled when terminal in any state (a cancelled wait included), and its
// children are its DependsOn targets — the child work the parent declared,
// as in the seed's migration ("depends_on → transformation tests"). The
// child edge is the parent's own, immutable declaration, so release needs no
// new record and no free-text matching of the scope member; reviews,
// derived_from and predecessor stay non-blocking and play no part. Unrolled:
// a claim has released its scope when every claim of its DependsOn closure,
// itself included, is terminal with its waits settled; an unknown wait or
// child holds it back; a cycle whose members are all settled releases
// together (nothing under it is unfinished). The release is derived on read
// (View.ScopeReleased, View.ScopeRelease with the reason and what is still
// held), walks only the closure, and changes no state.
//
// # Records
//
// One JSON object per log line, "ts" (RFC 3339, UTC) and "type" first, then
// the type's members in a fixed order (optional members omitted when empty).
// Members are snake_case. The log's envelope member "tally" is ignored;
// members this package does not know are kept (Event.Extra) and re-encoded
// after the known ones. The acting identity is the log's (Meta.Actor), not a
// member. Digests are 64 lowercase hex digits (package artifact). One
// example per type:
//
// claim.create — the claimant issues a claim; its terms are immutable (a change is a successor naming it as predecessor). max_responses is written explicitly (default 4).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C17","claimant":"maintainer","respondent":"parser","work":"reject incomplete Unicode escapes","scope":"string parser and its regression tests","max_responses":4,"deadline":"2026-09-04T17:00:00Z","depends_on":["C12"],"awaits":["C13"],"reviews":["C9"],"derived_from":["C3"],"predecessor":"C16","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":2,"fallbacks":[{"name":"command","version":"0.9"}]},{"id":"review","validator":{"name":"review","version":"1"},"evaluator":"maintainer","mode":"required","phases":["quality"],"attempts":1}]}]}
//
// claim.create posted to a pool — no respondent ("respondent":""): pool names the seats that may take it (absent: any seat), and the first to acquire its receipt becomes the respondent; a later acquirer is refused, naming the holder. priority is 0 (highest) to 4, absent for the default 2. Both members come after the ones a reader of 2026-11 knows, which keeps them as unknown members (and folds the record as an invalid claim, its respondent being empty).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C19","claimant":"maintainer","respondent":"","work":"triage the parser bug reports","max_responses":4,"deadline":"2026-09-02T17:00:00Z","slots":[],"pool":["parser","parser-2"],"priority":1}
//
// claim.post — the claimant makes a generated claim actionable: Generated → Posted.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C17"}
//
// claim.post.failed — the claimant records that posting failed: PostFailed.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.post.failed","claim":"C17","reason":"respondent unreachable"}
//
// claim.receipt — the respondent acquires the execution receipt, holder itself, generation 1: Posted → Received.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.receipt","claim":"C17","holder":"parser","generation":1}
//
// claim.receipt.failed — the respondent could not take the receipt: ReceiptFailed.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.receipt.failed","claim":"C17","reason":"out of scope for this agent"}
//
// claim.adopt — the claimant moves the receipt to a new holder at the next generation; every later write under an older generation is refused (the reclaim path).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.adopt","claim":"C17","holder":"parser-2","generation":2,"reason":"parser stopped answering"}
//
// claim.progress — the holder (current generation) records progress: Progressed.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.progress","claim":"C17","generation":1,"note":"found the faulty branch"}
//
// claim.artifact — an artifact is published. output and diagnostic: by the holder in the open work cycle; result: an evaluator's or the claimant's evidence (no generation, no cycle; ends at Generated). digest = digest.ArtifactDigest over kind, schema, producer (the acting identity), claim, cycle, role, slot, size and content; the artifact id and name are outside it.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.artifact","claim":"C17","artifact":"A","role":"output","slot":"change","kind":"patch","schema":"text/x-diff","name":"fix.patch","cycle":1,"generation":1,"content":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":812,"digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
//
// claim.artifact.receive — the claimant records that it observed one output or diagnostic artifact.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.artifact.receive","claim":"C17","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
//
// claim.testament — role response: the holder closes the open work cycle (outcome, summary, confidence, slot → artifact bindings frozen here; a non-complete outcome cites ≥ 1 diagnostic): TestamentGenerated. role result: the claimant's audit of the checks (summary and result artifacts; ends at Posted, never drives acceptance).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.testament","claim":"C17","testament":"T1","role":"response","generation":1,"cycle":1,"outcome":"complete","summary":"Added a length check before decoding the escape.","confidence":0.9,"bindings":[{"slot":"change","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}
//
// claim.testament — role response: the holder closes the open work cycle (outcome, summary, confidence, slot → artifact bindings frozen here; a non-complete outcome cites ≥ 1 diagnostic): TestamentGenerated. role result: the claimant's audit of the checks (summary and result artifacts; ends at Posted, never drives acceptance).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.testament","claim":"C17","testament":"R1","role":"result","summary":"behavior passed on A; review failed on A","results":[{"artifact":"E1","digest":"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"}]}
//
// claim.testament.failed — the holder could not generate its testament: TestamentGenerationFailed.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.testament.failed","claim":"C17","generation":1,"reason":"lost the work tree"}
//
// claim.testament.post — the author posts a closed testament (a response testament only under the current generation).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.testament.post","claim":"C17","testament":"T1"}
//
// claim.testament.receive — the claimant receives a posted response testament: the implicit delivery check passes, TestamentAcknowledged. A received response missing a Required slot is a committed cause (ValidationIncomplete) for that slot.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.testament.receive","claim":"C17","testament":"T1"}
//
// claim.check.begin — the designated evaluator starts the next attempt of a check on one target pinned by artifact id and digest, bound to the check's slot in a received response: Validating. phase, handler (0 = primary validator, i = fallback i), validator and attempt follow the state.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.check.begin","claim":"C17","check":"behavior","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","phase":"programmatic","handler":0,"validator":{"name":"command","version":"1"},"attempt":1}
//
// claim.check.verdict — the designated evaluator reports the running attempt: pass (next phase, or the check passes on that target), fail and incomplete (conclusive), error (next attempt, then the next fallback, then errored). evidence is the evaluator's own result artifact.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.check.verdict","claim":"C17","check":"behavior","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","phase":"programmatic","handler":0,"validator":{"name":"command","version":"1"},"attempt":1,"result":"pass","evidence":"E1","evidence_digest":"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee","note":"4 of 4 cases"}
//
// claim.cancel — the claimant ends the claim: Cancelled (fences running checks).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.cancel","claim":"C17","reason":"no longer needed"}
//
// claim.revoke — the claimant withdraws the work from its receipt holder: Revoked (fences running checks).
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.revoke","claim":"C17","reason":"work withdrawn"}
//
// claim.supersede — the claimant ends the claim in favour of a successor that names it as predecessor: Superseded.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.supersede","claim":"C17","successor":"C18","reason":"terms changed"}
//
// claim.deadline — the timekeeper commits a passed deadline: Expired.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.deadline","claim":"C17","deadline":"2026-09-04T17:00:00Z"}
//
// claim.dependency — the fact that a DependsOn target ended unsatisfied: DependencyFailed, naming the target (on) and where the failure started (origin). Decide appends these facts itself, in the batch of the record that caused the failure.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.dependency","claim":"C20","on":"C17","origin":"C17"}
//
// claim.deadlock — the timekeeper commits a wait-cycle over Awaits edges whose deadline passed: its canonical victim (lowest creation sequence) becomes Deadlocked, releasing the others. members is the cycle, sorted.
//
//	{"ts":"2026-09-01T17:00:00Z","type":"claim.deadlock","claim":"C21","members":["C21","C22"]}
package claim
