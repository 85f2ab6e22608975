package claim

import (
	"strings"
	"time"

	"tally/digest"
)

// Command is one verb of the claim family. Decide turns it into records.
type Command interface{ isCommand() }

// Create issues a claim; the acting identity is its claimant. MaxResponses 0
// means DefaultMaxResponses; a zero Deadline means none. The terms default
// here, for every mode alike: a slot or check without a mode is Required, a
// check without an evaluator is run by the claimant, without phases it is
// programmatic, without attempts it has 1, a validator without a version is
// version 1. A successor (Predecessor set) that declares no slots inherits
// its predecessor's slots and checks (Inherits); one that would have no
// requirement at all is refused unless NoChecks says so.
type Create struct {
	Claim, Respondent, Work, Scope string
	Claimant                       string // defaults to the acting identity; must equal it
	MaxResponses                   int
	Deadline                       time.Time
	DependsOn, Awaits              []string
	Reviews, DerivedFrom           []string
	Predecessor                    string
	Slots                          []SlotSpec
	NoChecks                       bool // no slots, on purpose: the closing testament is the only requirement
	// Without a Respondent the claim is posted to a pool: Pool names the
	// seats that may take it (none: any seat), and the first to acquire
	// the receipt becomes the respondent.
	Pool     []string
	Priority *int // 0 (highest) to MaxPriority; nil: DefaultPriority, not recorded
}

// Inherits reports whether the claim takes its predecessor's slots and
// checks: a successor that declares none and does not say NoChecks.
func (c Create) Inherits() bool { return c.Predecessor != "" && len(c.Slots) == 0 && !c.NoChecks }

// InheritNote is what a write of c says beside its records when c
// inherited its terms (else ""): the slots and checks now required.
func InheritNote(c Create, v *View) string {
	if !c.Inherits() {
		return ""
	}
	var slots []string
	for _, sl := range v.Slots {
		ids := make([]string, len(sl.Checks))
		for i, ch := range sl.Checks {
			ids[i] = ch.ID
		}
		slots = append(slots, sl.Name+" ("+strings.Join(ids, ", ")+")")
	}
	return c.Claim + " inherits the slots and checks of its predecessor " + c.Predecessor + ": " + strings.Join(slots, "; ")
}

// Post makes a generated claim actionable (claimant).
type Post struct{ Claim string }

// ReportPostFailure records that posting failed (claimant): PostFailed.
type ReportPostFailure struct{ Claim, Reason string }

// AcquireReceipt takes the execution receipt at generation 1 (the
// respondent, or for a claim posted to a pool the first seat that may).
type AcquireReceipt struct{ Claim string }

// DeclineReceipt records that the respondent could not take the receipt:
// ReceiptFailed.
type DeclineReceipt struct{ Claim, Reason string }

// Adopt moves the receipt to Holder at the next generation (claimant): the
// reclaim path for work whose agent died. The old holder is fenced.
type Adopt struct{ Claim, Holder, Reason string }

// Progress records a progress note under the receipt (holder).
type Progress struct {
	Claim      string
	Generation uint64
	Note       string
}

// PublishArtifact records an artifact whose bytes the caller has stored.
// Output and diagnostic artifacts belong to the holder's open work cycle
// (Generation required); result artifacts are an evaluator's or the
// claimant's evidence. The digest is computed here. The description
// defaults here, for every mode alike: without a role an artifact for a slot
// is an output, one under a receipt generation a diagnostic, else a result;
// without a kind it is a "file".
type PublishArtifact struct {
	Claim, Artifact          string
	Role                     Role
	Slot, Kind, Schema, Name string
	Generation               uint64
	Content                  digest.ContentDigest
	Size                     int64
}

// DefaultRole is role, else the role an artifact's description implies: an
// output for a slot, a diagnostic under a receipt generation, else a result
// (an evaluator's or the claimant's evidence).
func DefaultRole(role Role, slot string, generation uint64) Role {
	switch {
	case role != "":
		return role
	case slot != "":
		return RoleOutput
	case generation > 0:
		return RoleDiagnostic
	}
	return RoleResult
}

// ReceiveArtifact records the claimant's receipt of one artifact. An empty
// Digest pins the artifact's recorded digest.
type ReceiveArtifact struct{ Claim, Artifact, Digest string }

// CloseTestament closes the open work cycle with the holder's account.
// Bindings and diagnostics with an empty digest pin the recorded one; an
// empty Outcome is Complete.
type CloseTestament struct {
	Claim, Testament string
	Generation       uint64
	Outcome          Outcome
	Summary          string
	Confidence       *float64
	Bindings         []Binding
	Diagnostics      []Ref
}

// ResultTestament records the claimant's audit of the checks (ends at Posted).
type ResultTestament struct {
	Claim, Testament, Summary string
	Confidence                *float64
	Results                   []Ref
}

// FailTestament records that the holder could not generate a testament.
type FailTestament struct {
	Claim      string
	Generation uint64
	Reason     string
}

// PostTestament posts a closed testament (its author, or the claimant for a
// result testament).
type PostTestament struct{ Claim, Testament string }

// ReceiveTestament records the claimant's receipt of a posted testament.
type ReceiveTestament struct{ Claim, Testament string }

// BeginCheck records the start of the next attempt of a check on one pinned
// target (designated evaluator). Phase, handler, validator and attempt are
// filled from the state. An empty Digest pins the artifact's recorded digest.
type BeginCheck struct{ Claim, Check, Artifact, Digest string }

// ReportVerdict records a verdict with its evidence (designated evaluator).
// If no attempt is running on the target, Decide records its begin first.
// With Publish set, the evidence is published in the same batch, first:
// Evidence and EvidenceDigest then name that artifact, and a refused verdict
// leaves no evidence behind either.
type ReportVerdict struct {
	Claim, Check, Artifact, Digest string
	Result                         Result
	Evidence, EvidenceDigest, Note string
	Publish                        *PublishArtifact // the evidence to publish with the verdict (role result)
}

// Cancel ends the claim (claimant).
type Cancel struct{ Claim, Reason string }

// Revoke withdraws the work from its receipt holder (claimant).
type Revoke struct{ Claim, Reason string }

// Supersede ends the claim in favour of a successor naming it (claimant).
type Supersede struct{ Claim, Successor, Reason string }

// CommitDeadline commits a passed deadline (timekeeper): Expired, or, when
// the claim sits on a wait-cycle of Awaits edges, Deadlocked for the cycle's
// canonical victim.
type CommitDeadline struct{ Claim string }

// CommitDependency commits the DependencyFailed fact for a claim whose
// DependsOn target ended unsatisfied (any participant; the fact is checked).
// Decide emits these facts itself; this verb repairs a log that lacks them.
type CommitDependency struct{ Claim string }

func (Create) isCommand()            {}
func (Post) isCommand()              {}
func (ReportPostFailure) isCommand() {}
func (AcquireReceipt) isCommand()    {}
func (DeclineReceipt) isCommand()    {}
func (Adopt) isCommand()             {}
func (Progress) isCommand()          {}
func (PublishArtifact) isCommand()   {}
func (ReceiveArtifact) isCommand()   {}
func (CloseTestament) isCommand()    {}
func (ResultTestament) isCommand()   {}
func (FailTestament) isCommand()     {}
func (PostTestament) isCommand()     {}
func (ReceiveTestament) isCommand()  {}
func (BeginCheck) isCommand()        {}
func (ReportVerdict) isCommand()     {}
func (Cancel) isCommand()            {}
func (Revoke) isCommand()            {}
func (Supersede) isCommand()         {}
func (CommitDeadline) isCommand()    {}
func (CommitDependency) isCommand()  {}
