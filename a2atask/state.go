package a2atask

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/claim"
	"tally/expect"
	"tally/promise"
)

// States are A2A v1.0's task states, which a ListTasks filter may name.
func States() []a2a.TaskState {
	return []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCanceled, a2a.TaskStateRejected, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired}
}

// StateNames are the States as they are spelled on the wire.
func StateNames() []string {
	states := States()
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	return names
}

// PromiseState maps a promise's status to its task's state:
//
//	owed        → TASK_STATE_WORKING   (overdue is not a state: see the record's "overdue")
//	conditional → TASK_STATE_SUBMITTED (accepted, waiting on its antecedent)
//	satisfied   → TASK_STATE_COMPLETED
//	cancelled   → TASK_STATE_REJECTED  (the debtor, who does the work, declined it)
//	released    → TASK_STATE_CANCELED
//	expired     → TASK_STATE_CANCELED
//
// Assessments (violated) stay in the record and never change the state.
func PromiseState(s promise.Status) a2a.TaskState {
	switch s {
	case promise.Satisfied:
		return a2a.TaskStateCompleted
	case promise.Cancelled:
		return a2a.TaskStateRejected
	case promise.Released, promise.Expired:
		return a2a.TaskStateCanceled
	case promise.Conditional:
		return a2a.TaskStateSubmitted
	}
	return a2a.TaskStateWorking
}

// ClaimState maps a claim's state to its task's state:
//
//	Generated, Posted                      → TASK_STATE_SUBMITTED (issued; nobody holds the work yet)
//	Received, Progressed,
//	TestamentGenerated,
//	TestamentAcknowledged, Validating      → TASK_STATE_WORKING
//	Satisfied                              → TASK_STATE_COMPLETED
//	ReceiptFailed                          → TASK_STATE_REJECTED (the respondent declined the work)
//	ValidationIncomplete decided by a
//	response whose outcome is refused      → TASK_STATE_REJECTED
//	Cancelled, Revoked, Superseded         → TASK_STATE_CANCELED (the claimant withdrew the work)
//	any other terminal state               → TASK_STATE_FAILED
//
// Overdue is not a state: the record says "overdue". Cancelled maps to
// CANCELED, not REJECTED as a promise's cancellation does, because a claim
// is cancelled by its claimant, the party that asked for the work (A2A's
// CANCELED), whereas a promise is cancelled by its debtor, the party doing
// it (A2A's REJECTED, here ReceiptFailed).
func ClaimState(v *claim.View) a2a.TaskState {
	switch v.State {
	case claim.Generated, claim.Posted:
		return a2a.TaskStateSubmitted
	case claim.Satisfied:
		return a2a.TaskStateCompleted
	case claim.ReceiptFailed:
		return a2a.TaskStateRejected
	case claim.Cancelled, claim.Revoked, claim.Superseded:
		return a2a.TaskStateCanceled
	case claim.ValidationIncomplete:
		if refusedResponse(v) {
			return a2a.TaskStateRejected
		}
	}
	if v.State.Terminal() {
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateWorking
}

// refusedResponse reports whether the response that ended the claim
// reported the outcome refused: the respondent declined the work.
func refusedResponse(v *claim.View) bool {
	if v.Terminal == nil || v.Terminal.Testament == "" {
		return false
	}
	for _, t := range v.Testaments {
		if t.Testament == v.Terminal.Testament {
			return t.Outcome == string(claim.Refused)
		}
	}
	return false
}

// OriginState maps an origin task's recorded outcome to its state; an
// origin with none ("") is WORKING.
func OriginState(out expect.Outcome) a2a.TaskState {
	switch out {
	case expect.OutcomeCancelled:
		return a2a.TaskStateCanceled
	case expect.OutcomeFailed:
		return a2a.TaskStateFailed
	case expect.OutcomeCompleted:
		return a2a.TaskStateCompleted
	}
	return a2a.TaskStateWorking
}
