package claim

import (
	"time"

	"tally/refuse"
)

// Status is a claim's state. Stored in views and --json output: do not rename.
type Status string

// The claim states. The first seven are open stages, in order; the rest are
// terminal and absorb every later event.
const (
	Generated             Status = "Generated"
	Posted                Status = "Posted"
	Received              Status = "Received"
	Progressed            Status = "Progressed"
	TestamentGenerated    Status = "TestamentGenerated"
	TestamentAcknowledged Status = "TestamentAcknowledged"
	Validating            Status = "Validating"

	Satisfied Status = "Satisfied"

	PostFailed                Status = "PostFailed"
	ReceiptFailed             Status = "ReceiptFailed"
	TestamentGenerationFailed Status = "TestamentGenerationFailed"
	ValidationIncomplete      Status = "ValidationIncomplete"
	ValidationFailed          Status = "ValidationFailed"
	ValidationErrored         Status = "ValidationErrored"

	Cancelled        Status = "Cancelled"
	Revoked          Status = "Revoked"
	Superseded       Status = "Superseded"
	Expired          Status = "Expired"
	DependencyFailed Status = "DependencyFailed"
	Deadlocked       Status = "Deadlocked"
)

// stageRank orders the open stages; a claim's stage only moves forward.
var stageRank = map[Status]int{
	Generated: 1, Posted: 2, Received: 3, Progressed: 4,
	TestamentGenerated: 5, TestamentAcknowledged: 6, Validating: 7,
}

// Terminal reports whether s absorbs every later event.
func (s Status) Terminal() bool { _, open := stageRank[s]; return !open && s != "" }

// fenced reports whether a terminal state also ends the authority of checks
// already running: after an authorized stop, a late verdict is refused.
func (s Status) fenced() bool { return s == Cancelled || s == Revoked || s == Superseded }

// Mode says whether a slot or check gates acceptance. Stored: do not rename.
type Mode string

const (
	Required Mode = "required" // must pass for acceptance
	Observe  Mode = "observe"  // recorded only; never delays or fails acceptance
)

// Phase is one ordered step of a check. Stored: do not rename.
type Phase string

const (
	Programmatic Phase = "programmatic" // a tool or script; runs first
	Quality      Phase = "quality"      // an agentic judgment; runs after a programmatic pass
)

// Outcome is the respondent's reported outcome of a work cycle. Stored: do
// not rename.
type Outcome string

const (
	Complete    Outcome = "complete"
	Partial     Outcome = "partial"
	Refused     Outcome = "refused"
	Impossible  Outcome = "impossible"
	Interrupted Outcome = "interrupted"
	Failed      Outcome = "failed"
)

// Result is a verdict. Stored: do not rename.
type Result string

// resultRule is the refusal of a result that is not one of these.
const resultRule = "must be pass, fail, incomplete or error"

// Valid reports whether r is one of the four results.
func (r Result) Valid() bool { return r == Pass || r == Fail || r == Incomplete || r == Error }

// CheckResult refuses a result that is not one of the four, as Decide does:
// for a caller that must refuse before it stores evidence.
func CheckResult(r Result) *refuse.Refusal {
	if !r.Valid() {
		return refuse.Invalidf("result", resultRule)
	}
	return nil
}

const (
	Pass       Result = "pass"       // the target meets the requirement (this phase)
	Fail       Result = "fail"       // conclusive: the target does not meet it
	Incomplete Result = "incomplete" // conclusive: nothing to evaluate
	Error      Result = "error"      // could not evaluate; may be retried
)

// Role is what an artifact is for. Stored: do not rename.
type Role string

const (
	RoleOutput     Role = "output"     // fills a declared slot; may drive acceptance
	RoleDiagnostic Role = "diagnostic" // explains a missing output or a failed cycle
	RoleResult     Role = "result"     // an evaluator's evidence; ends at Generated
)

// Testament roles. Stored: do not rename.
const (
	TestamentResponse = "response" // the holder's closing account of one work cycle
	TestamentResult   = "result"   // the claimant's audit of the checks; ends at Posted
)

// DeliveryCheck is the id under which views report the implicit Required
// check every claim carries: the claimant received a closing testament.
// Reserved: no declared check may use it.
const DeliveryCheck = "delivery"

// DefaultMaxResponses is the number of work cycles a claim allows when its
// creator does not say.
const DefaultMaxResponses = 4

// Bounds on a claim's terms. They keep a hostile record from making the fold
// quadratic; raising one is safe, lowering one can refuse stored claims.
const (
	MaxResponsesLimit = 64
	MaxSlots          = 64
	MaxChecksPerSlot  = 64
	MaxFallbacks      = 16
	MaxAttempts       = 64
	MaxRelations      = 1024
	MaxBindings       = MaxSlots
	MaxRefs           = 256
	MaxIDLength       = 256
	MaxTextLength     = 64 << 10
)

// Validator names the definition a check runs, pinned by version.
type Validator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// CheckSpec is one declared validation of a slot.
type CheckSpec struct {
	ID        string      `json:"id"`
	Validator Validator   `json:"validator"`
	Evaluator string      `json:"evaluator"`
	Mode      Mode        `json:"mode"`
	Phases    []Phase     `json:"phases"`
	Attempts  int         `json:"attempts"`
	Fallbacks []Validator `json:"fallbacks,omitempty"`
}

// handler returns the validator of handler index h (0 = primary).
func (c *CheckSpec) handler(h int) Validator {
	if h == 0 {
		return c.Validator
	}
	return c.Fallbacks[h-1]
}

// SlotSpec is one declared output of a claim with its checks.
type SlotSpec struct {
	Name   string      `json:"name"`
	Mode   Mode        `json:"mode"`
	Checks []CheckSpec `json:"checks"`
}

// Binding maps a slot to the artifact a testament delivers for it.
type Binding struct {
	Slot     string `json:"slot"`
	Artifact string `json:"artifact"`
	Digest   string `json:"digest"`
}

// Ref names an artifact by id and digest.
type Ref struct {
	Artifact string `json:"artifact"`
	Digest   string `json:"digest"`
}

// Meta is what the log knows about a record beyond its own fields.
type Meta struct {
	Seq   uint64    // position in the session log, from 1
	Actor string    // the authenticated identity that appended the record
	TS    time.Time // the record's time as committed
}
