package claim

import (
	"strconv"

	"tally/refuse"
)

// Lookups on a claim's view that every binding shares: the CLI picks a
// check's target and its validator from them, and the service decides from
// them which stored bytes to verify before a check record is appended.

// StoredArtifact is one row of an artifact listing (`tally artifact ls` and
// `tally artifact verify`): a recorded artifact and the custody of its bytes.
type StoredArtifact struct {
	Claim string `json:"claim"`
	ArtifactView
	Stored string `json:"stored"` // present | missing (ls); ok | missing | damaged (verify)
}

// FindArtifact returns artifact id as the view records it.
func (v *View) FindArtifact(id string) (ArtifactView, bool) {
	for _, a := range v.Artifacts {
		if a.Artifact == id {
			return a, true
		}
	}
	return ArtifactView{}, false
}

// AttemptOn returns the check the view declares and its attempt on artifact
// art (nil when there is none yet, or no such check).
func (v *View) AttemptOn(check, art string) (*CheckView, *AttemptView) {
	for i := range v.Slots {
		for j := range v.Slots[i].Checks {
			ch := &v.Slots[i].Checks[j]
			if ch.ID != check {
				continue
			}
			for k := range ch.Targets {
				if ch.Targets[k].Artifact == art {
					return ch, &ch.Targets[k]
				}
			}
			return ch, nil
		}
	}
	return nil, nil
}

// TargetToVerify reports whether a check record on artifact art must first
// verify the target's bytes, and returns the artifact. It need not when the
// artifact is unknown (the core refuses that itself), nor, with onlyIfNew
// (a report), when an attempt on it is already running: its bytes were
// verified when the attempt began.
func (v *View) TargetToVerify(check, art string, onlyIfNew bool) (ArtifactView, bool) {
	a, ok := v.FindArtifact(art)
	if !ok {
		return a, false
	}
	if onlyIfNew {
		if _, at := v.AttemptOn(check, art); at != nil && at.State == "running" {
			return a, false
		}
	}
	return a, true
}

// SelectArtifact keeps the rows of artifact id of claimID; none is refused.
func SelectArtifact(rows []StoredArtifact, claimID, id string) ([]StoredArtifact, error) {
	var one []StoredArtifact
	for _, a := range rows {
		if a.Claim == claimID && a.Artifact == id {
			one = append(one, a)
		}
	}
	if len(one) == 0 {
		return nil, UnknownArtifact(claimID, id)
	}
	return one, nil
}

// UnknownClaim is the refusal for a verb naming no known claim.
func UnknownClaim(id string) error { return refuse.NotFoundf("claim", "no claim "+strconv.Quote(id)) }

// UnknownArtifact is the refusal for an artifact a claim does not record.
func UnknownArtifact(claimID, id string) error {
	return refuse.NotFoundf("artifact", "claim "+claimID+" has no artifact "+strconv.Quote(id))
}

// AttemptResult is one verdict an attempt on a target recorded.
type AttemptResult = resultRec
