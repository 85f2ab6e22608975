package claim

import (
	"strings"
	"unicode"

	"tally/digest"
	"tally/family"
	"tally/textcheck"
)

// form checks a record's fields. fresh adds the rules a record being
// decided now must meet and one already in a log need not (it was
// accepted before them, and must still fold): textcheck.IdentifierFault and
// textcheck.TextFault.
type form struct{ fresh bool }

// checkID validates an identifier: non-empty, bounded, no whitespace or
// control characters (and, fresh, nothing textcheck.IdentifierFault refuses).
func (ck form) checkID(field, id string) error {
	if id == "" {
		return derr(field, "must not be empty")
	}
	if len(id) > MaxIDLength {
		return derr(field, "must be at most %d bytes", MaxIDLength)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\uFFFD' {
			return derr(field, "must not contain whitespace or control characters")
		}
	}
	if f := textcheck.IdentifierFault(id); ck.fresh && f != "" {
		return derr(field, "%s", f)
	}
	return nil
}

func (ck form) checkText(field, s string, required bool) error {
	if required && strings.TrimSpace(s) == "" {
		return derr(field, "must not be blank")
	}
	if len(s) > MaxTextLength {
		return derr(field, "must be at most %d bytes", MaxTextLength)
	}
	if f := textcheck.TextFault(s); ck.fresh && f != "" {
		return derr(field, "%s", f)
	}
	return nil
}

func checkDigest(field, s string) error {
	if _, err := digest.ParseDigest(s); err != nil {
		return derr(field, "must be 64 lowercase hex digits")
	}
	return nil
}

func (ck form) checkIDs(field string, ids []string) error {
	if len(ids) > MaxRelations {
		return derr(field, "must list at most %d claims", MaxRelations)
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := ck.checkID(field, id); err != nil {
			return err
		}
		if seen[id] {
			return derr(field, "lists %q twice", id)
		}
		seen[id] = true
	}
	return nil
}

func (ck form) checkRefs(field string, refs []Ref) error {
	if len(refs) > MaxRefs {
		return derr(field, "must list at most %d artifacts", MaxRefs)
	}
	seen := make(map[string]bool, len(refs))
	for _, r := range refs {
		if err := ck.checkID(field+".artifact", r.Artifact); err != nil {
			return err
		}
		if err := checkDigest(field+".digest", r.Digest); err != nil {
			return err
		}
		if seen[r.Artifact] {
			return derr(field, "lists %q twice", r.Artifact)
		}
		seen[r.Artifact] = true
	}
	return nil
}

func (ck form) checkValidator(field string, v Validator) error {
	// The field names are built on error only: Decide checks a validator
	// on every check record.
	if err := ck.checkID(field, v.Name); err != nil {
		err.(*family.DecodeError).Field = field + ".name"
		return err
	}
	if err := ck.checkID(field, v.Version); err != nil {
		err.(*family.DecodeError).Field = field + ".version"
		return err
	}
	return nil
}

func validMode(m Mode) bool { return m == Required || m == Observe }

// checkSlots validates declared slots and checks (names unique, check ids
// unique across the claim, phases ordered, attempts bounded).
func (ck form) checkSlots(slots []SlotSpec) error {
	if len(slots) > MaxSlots {
		return derr("slots", "must declare at most %d slots", MaxSlots)
	}
	slotNames := map[string]bool{}
	checkIDs := map[string]bool{DeliveryCheck: true}
	for _, sl := range slots {
		if err := ck.checkID("slots.name", sl.Name); err != nil {
			return err
		}
		if slotNames[sl.Name] {
			return derr("slots.name", "declares %q twice", sl.Name)
		}
		slotNames[sl.Name] = true
		if !validMode(sl.Mode) {
			return derr("slots.mode", "must be required or observe")
		}
		if len(sl.Checks) > MaxChecksPerSlot {
			return derr("slots.checks", "must declare at most %d checks per slot", MaxChecksPerSlot)
		}
		for _, c := range sl.Checks {
			if err := ck.checkID("checks.id", c.ID); err != nil {
				return err
			}
			if checkIDs[c.ID] {
				return derr("checks.id", "%q is declared twice or reserved", c.ID)
			}
			checkIDs[c.ID] = true
			if err := ck.checkValidator("checks.validator", c.Validator); err != nil {
				return err
			}
			if err := ck.checkID("checks.evaluator", c.Evaluator); err != nil {
				return err
			}
			if !validMode(c.Mode) {
				return derr("checks.mode", "must be required or observe")
			}
			switch {
			case len(c.Phases) == 1 && (c.Phases[0] == Programmatic || c.Phases[0] == Quality):
			case len(c.Phases) == 2 && c.Phases[0] == Programmatic && c.Phases[1] == Quality:
			default:
				return derr("checks.phases", "must be [programmatic], [quality] or [programmatic, quality]")
			}
			if c.Attempts < 1 || c.Attempts > MaxAttempts {
				return derr("checks.attempts", "must be from 1 to %d", MaxAttempts)
			}
			if len(c.Fallbacks) > MaxFallbacks {
				return derr("checks.fallbacks", "must list at most %d validators", MaxFallbacks)
			}
			for _, f := range c.Fallbacks {
				if err := ck.checkValidator("checks.fallbacks", f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// wellFormed checks a record on its own (no state): identifiers,
// enumerations, digests, bounds. Decode and Decide both call it, so a record
// the core writes always decodes.
func (e *Event) wellFormed(fresh bool) error {
	ck := form{fresh: fresh}
	e.normalize()
	if err := ck.checkID("claim", e.Claim); err != nil {
		return err
	}
	switch e.Type {
	case TypeCreate:
		if err := ck.checkID("claimant", e.Claimant); err != nil {
			return err
		}
		// No respondent posts the claim to a pool: the first seat to take
		// its receipt becomes the respondent.
		if e.Respondent != "" {
			if err := ck.checkID("respondent", e.Respondent); err != nil {
				return err
			}
			if len(e.Pool) > 0 {
				return derr("pool", "a claim names a respondent or a pool of seats, not both")
			}
		}
		if len(e.Pool) > MaxPoolSeats {
			return derr("pool", "must list at most %d seats", MaxPoolSeats)
		}
		seats := make(map[string]bool, len(e.Pool))
		for _, seat := range e.Pool {
			if err := ck.checkID("pool", seat); err != nil {
				return err
			}
			if seats[seat] {
				return derr("pool", "lists %q twice", seat)
			}
			seats[seat] = true
		}
		if e.Priority != nil && (*e.Priority < 0 || *e.Priority > MaxPriority) {
			return derr("priority", "must be an integer from 0 (highest) to %d", MaxPriority)
		}
		if err := ck.checkText("work", e.Work, true); err != nil {
			return err
		}
		if err := ck.checkText("scope", e.Scope, false); err != nil {
			return err
		}
		if e.MaxResponses < 1 || e.MaxResponses > MaxResponsesLimit {
			return derr("max_responses", "must be from 1 to %d", MaxResponsesLimit)
		}
		for _, r := range []struct {
			n   string
			ids []string
		}{{"depends_on", e.DependsOn}, {"awaits", e.Awaits}, {"reviews", e.Reviews}, {"derived_from", e.DerivedFrom}} {
			if err := ck.checkIDs(r.n, r.ids); err != nil {
				return err
			}
		}
		if e.Predecessor != "" {
			if err := ck.checkID("predecessor", e.Predecessor); err != nil {
				return err
			}
			if e.Predecessor == e.Claim {
				return derr("predecessor", "must name another claim")
			}
		}
		return ck.checkSlots(e.Slots)
	case TypePostFailed, TypeReceiptFailed, TypeCancel, TypeRevoke, TypeTestamentFailed:
		return ck.checkText("reason", e.Reason, true)
	case TypeReceipt, TypeAdopt:
		if err := ck.checkID("holder", e.Holder); err != nil {
			return err
		}
		if e.Generation < 1 {
			return derr("generation", "must be at least 1")
		}
		return ck.checkText("reason", e.Reason, false)
	case TypeProgress:
		if e.Generation < 1 {
			return derr("generation", "must be at least 1")
		}
		return ck.checkText("note", e.Note, true)
	case TypeArtifact:
		if err := ck.checkID("artifact", e.Artifact); err != nil {
			return err
		}
		if err := ck.checkID("kind", e.Kind); err != nil {
			return err
		}
		if e.Schema != "" {
			if err := ck.checkID("schema", e.Schema); err != nil {
				return err
			}
		}
		if err := ck.checkText("name", e.Name, false); err != nil {
			return err
		}
		if _, err := digest.ParseContentDigest(e.Content); err != nil {
			return derr("content", "must be 64 lowercase hex digits")
		}
		if err := checkDigest("digest", e.Digest); err != nil {
			return err
		}
		switch Role(e.Role) {
		case RoleOutput:
			if err := ck.checkID("slot", e.Slot); err != nil {
				return err
			}
		case RoleDiagnostic, RoleResult:
			if e.Slot != "" {
				return derr("slot", "is only for output artifacts")
			}
		default:
			return derr("role", "must be output, diagnostic or result")
		}
		if Role(e.Role) == RoleResult {
			if e.Generation != 0 || e.Cycle != 0 {
				return derr("generation", "a result artifact belongs to no work cycle")
			}
		} else if e.Generation < 1 || e.Cycle < 1 {
			return derr("generation", "an output or diagnostic needs its generation and cycle")
		}
		return nil
	case TypeArtifactReceive:
		if err := ck.checkID("artifact", e.Artifact); err != nil {
			return err
		}
		return checkDigest("digest", e.Digest)
	case TypeTestament:
		if err := ck.checkID("testament", e.Testament); err != nil {
			return err
		}
		if err := ck.checkText("summary", e.Summary, true); err != nil {
			return err
		}
		switch e.Role {
		case TestamentResponse:
			if e.Generation < 1 || e.Cycle < 1 {
				return derr("generation", "a response testament needs its generation and cycle")
			}
			switch Outcome(e.Outcome) {
			case Complete, Partial, Refused, Impossible, Interrupted, Failed:
			default:
				return derr("outcome", "must be complete, partial, refused, impossible, interrupted or failed")
			}
			if Outcome(e.Outcome) != Complete && len(e.Diagnostics) == 0 {
				return derr("diagnostics", "a %s outcome must cite at least one diagnostic artifact", e.Outcome)
			}
			if len(e.Bindings) > MaxBindings {
				return derr("bindings", "must bind at most %d slots", MaxBindings)
			}
			slots := map[string]bool{}
			for _, b := range e.Bindings {
				if err := ck.checkID("bindings.slot", b.Slot); err != nil {
					return err
				}
				if slots[b.Slot] {
					return derr("bindings", "binds slot %q twice", b.Slot)
				}
				slots[b.Slot] = true
				if err := ck.checkID("bindings.artifact", b.Artifact); err != nil {
					return err
				}
				if err := checkDigest("bindings.digest", b.Digest); err != nil {
					return err
				}
			}
			if len(e.Results) != 0 {
				return derr("results", "belong to a result testament")
			}
			return ck.checkRefs("diagnostics", e.Diagnostics)
		case TestamentResult:
			if e.Generation != 0 || e.Cycle != 0 || e.Outcome != "" || len(e.Bindings) != 0 || len(e.Diagnostics) != 0 {
				return derr("role", "a result testament carries only a summary, confidence and results")
			}
			return ck.checkRefs("results", e.Results)
		}
		return derr("role", "must be response or result")
	case TypeTestamentPost, TypeTestamentReceive:
		return ck.checkID("testament", e.Testament)
	case TypeCheckBegin, TypeCheckVerdict:
		if err := ck.checkID("check", e.Check); err != nil {
			return err
		}
		if err := ck.checkID("artifact", e.Artifact); err != nil {
			return err
		}
		if err := checkDigest("digest", e.Digest); err != nil {
			return err
		}
		if p := Phase(e.Phase); p != Programmatic && p != Quality {
			return derr("phase", "must be programmatic or quality")
		}
		if err := ck.checkValidator("validator", e.Validator); err != nil {
			return err
		}
		if e.Attempt < 1 {
			return derr("attempt", "must be at least 1")
		}
		if e.Type == TypeCheckBegin {
			return nil
		}
		if !Result(e.Result).Valid() {
			return derr("result", resultRule)
		}
		if err := ck.checkID("evidence", e.Evidence); err != nil {
			return err
		}
		if err := checkDigest("evidence_digest", e.EvidenceHash); err != nil {
			return err
		}
		return ck.checkText("note", e.Note, false)
	case TypeSupersede:
		if err := ck.checkID("successor", e.Successor); err != nil {
			return err
		}
		if e.Successor == e.Claim {
			return derr("successor", "must name another claim")
		}
		return ck.checkText("reason", e.Reason, false)
	case TypeDeadline:
		if e.Deadline.IsZero() {
			return derr("deadline", "is required")
		}
	case TypeDependency:
		if err := ck.checkID("on", e.On); err != nil {
			return err
		}
		return ck.checkID("origin", e.Origin)
	case TypeDeadlock:
		if len(e.Members) == 0 {
			return derr("members", "must list the wait-cycle")
		}
		if err := ck.checkIDs("members", e.Members); err != nil {
			return err
		}
		for i := 1; i < len(e.Members); i++ {
			if e.Members[i-1] >= e.Members[i] {
				return derr("members", "must be sorted")
			}
		}
	}
	return nil
}
