package api

import (
	"encoding/json"
	"fmt"
	"time"

	"tally/promise"
)

// viewJSON is promise.View as AppendJSON writes it.
type viewJSON struct {
	ID          string          `json:"id"`
	Promise     string          `json:"promise"`
	By          string          `json:"by"`
	To          string          `json:"to"`
	On          *string         `json:"on"`
	Task        *string         `json:"task"`
	Until       time.Time       `json:"until"`
	Horizons    []time.Time     `json:"horizons"`
	State       string          `json:"state"`
	Overdue     bool            `json:"overdue"`
	Evidence    []string        `json:"evidence"`
	Reason      *string         `json:"reason"`
	ResolvedBy  *string         `json:"resolved_by"`
	ResolvedAt  *time.Time      `json:"resolved_at"`
	Assessments []assessJSON    `json:"assessments"`
	Declared    time.Time       `json:"declared"`
	Seq         uint64          `json:"seq"`
	Meta        json.RawMessage `json:"meta"`
}

type assessJSON struct {
	Observer string    `json:"observer"`
	State    string    `json:"state"`
	Note     *string   `json:"note"`
	TS       time.Time `json:"ts"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DecodeView reads a promise view as View.AppendJSON writes it (the server's
// responses), so a client prints it with the same code as a local read:
// DecodeView(v.AppendJSON(nil)) re-encodes to the same bytes.
func DecodeView(b []byte) (promise.View, error) {
	var j viewJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return promise.View{}, fmt.Errorf("promise view: %w", err)
	}
	v := promise.View{
		ID: j.ID, Promise: j.Promise, By: j.By, To: j.To, On: deref(j.On), Task: deref(j.Task),
		Until: j.Until.UTC(), State: promise.Status(j.State), Overdue: j.Overdue, Evidence: j.Evidence,
		Reason: deref(j.Reason), ResolvedBy: deref(j.ResolvedBy), Declared: j.Declared.UTC(), Seq: j.Seq,
	}
	for _, h := range j.Horizons {
		v.Horizons = append(v.Horizons, h.UTC())
	}
	if j.ResolvedAt != nil {
		v.ResolvedAt = j.ResolvedAt.UTC()
	}
	for _, a := range j.Assessments {
		v.Assessments = append(v.Assessments, promise.AssessmentView{Observer: a.Observer, State: a.State, Note: deref(a.Note), TS: a.TS.UTC()})
	}
	if m := string(j.Meta); m != "" && m != "null" {
		v.Meta = m
	}
	return v, nil
}

// DecodeViews reads a JSON array of promise views.
func DecodeViews(b []byte) ([]promise.View, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, fmt.Errorf("promise views: %w", err)
	}
	out := make([]promise.View, 0, len(raws))
	for _, r := range raws {
		v, err := DecodeView(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
