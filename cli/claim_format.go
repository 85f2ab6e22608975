package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"tally/claim"
	"tally/service"
)

func claimColor(s claim.Status, overdue bool) string {
	switch {
	case s == claim.Satisfied:
		return ansiGreen
	case s.Terminal():
		return ansiRed
	case overdue:
		return ansiRed
	default:
		return ansiYellow
	}
}

// stateLabel is a state for tables: an open claim past its deadline (the
// timekeeper has not committed the fact yet) says so.
func stateLabel(s claim.Status, overdue bool) string {
	if overdue {
		return string(s) + " (overdue)"
	}
	return string(s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// short12 shortens a digest for human output.
func short12(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// printCustody is the custody of a claim's artifacts on a cluster: which
// copies hold a receipt at the group's placement epoch, and which do not
// yet (an evaluation of the artifact waits for them). A single server
// reports none and nothing is printed.
func printCustody(w io.Writer, custody []service.ArtifactCustody, color bool) {
	if len(custody) == 0 {
		return
	}
	fmt.Fprintln(w, "\ncustody")
	t := newTable(w)
	for _, c := range custody {
		state := "whole"
		if len(c.Missing) > 0 {
			state = paint(color, ansiRed, "pending: no receipt from "+nodeList(c.Missing))
		}
		fmt.Fprintf(t, "  %s\tgroup %d, epoch %d\theld by %s\t%s\n", c.Artifact, c.Group, c.Epoch, orDash(nodeList(c.Holders)), state)
	}
	t.Flush()
}

// nodeList names nodes: "node 1, 2, 3".
func nodeList(ns []uint64) string {
	if len(ns) == 0 {
		return ""
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.FormatUint(n, 10)
	}
	return "node " + strings.Join(s, ", ")
}

// printClaim is `tally claim show`'s human form.
func printClaim(w io.Writer, v *claim.View, now time.Time, color bool) {
	fmt.Fprintf(w, "%s  %s\n", v.Claim, paint(color, claimColor(v.State, v.Overdue), stateLabel(v.State, v.Overdue)))
	t := newTable(w)
	fmt.Fprintf(t, "  work\t%s\n", v.Work)
	if v.Scope != "" {
		fmt.Fprintf(t, "  scope\t%s\n", v.Scope)
	}
	fmt.Fprintf(t, "  claimant → respondent\t%s → %s\n", v.Claimant, respondentLabel(v))
	if v.Priority != nil {
		fmt.Fprintf(t, "  priority\t%d\n", *v.Priority)
	}
	if v.Receipt != nil {
		fmt.Fprintf(t, "  receipt\t%s, generation %d\n", v.Receipt.Holder, v.Receipt.Generation)
	} else {
		fmt.Fprintf(t, "  receipt\tnone yet\n")
	}
	fmt.Fprintf(t, "  created\t%s (seq %d)\n", humanStamp(v.Created), v.CreatedSeq)
	if v.Deadline != "" {
		rel := ""
		if d, err := time.Parse(time.RFC3339Nano, v.Deadline); err == nil && v.Terminal == nil {
			rel = " (" + relative(d, now) + ")"
		}
		fmt.Fprintf(t, "  deadline\t%s%s\n", v.Deadline, rel)
	}
	fmt.Fprintf(t, "  work cycles\t%d of %d\n", v.Cycles, v.MaxResponses)
	if v.Predecessor != "" {
		fmt.Fprintf(t, "  predecessor\t%s\n", v.Predecessor)
	}
	if len(v.Successors) > 0 {
		fmt.Fprintf(t, "  successors\t%s\n", strings.Join(v.Successors, ", "))
	}
	if e := v.Terminal; e != nil {
		fmt.Fprintf(t, "  ended\t%s at seq %d, %s%s\n", e.State, e.Seq, humanStamp(e.TS), byActor(e.Actor))
		fmt.Fprintf(t, "  reason\t%s\n", e.Reason)
		var at []string
		for _, kv := range [][2]string{{"slot", e.Slot}, {"check", e.Check}, {"artifact", e.Artifact}, {"testament", e.Testament}, {"on", e.On}, {"origin", e.Origin}, {"successor", e.Successor}} {
			if kv[1] != "" {
				at = append(at, kv[0]+" "+kv[1])
			}
		}
		if len(e.Members) > 0 {
			at = append(at, "cycle "+strings.Join(e.Members, " → "))
		}
		if len(at) > 0 {
			fmt.Fprintf(t, "  decided by\t%s\n", strings.Join(at, ", "))
		}
	} else if v.Overdue {
		fmt.Fprintf(t, "  overdue\tthe deadline passed; the watcher has not committed it yet\n")
	}
	t.Flush()

	if len(v.Why) > 0 {
		fmt.Fprintln(w, "\nwhy it is not satisfied")
		for _, r := range v.Why {
			fmt.Fprintln(w, "  "+r.Text)
		}
	}

	fmt.Fprintln(w, "\nacceptance")
	t = newTable(w)
	fmt.Fprintf(t, "  delivery (implicit, required)\t%s\t%s\n", v.Delivery.State, orDash(v.Delivery.Testament))
	for _, s := range v.Slots {
		wit := "no witness"
		if s.Witness != nil {
			wit = "witness " + s.Witness.Artifact + " @" + short12(s.Witness.Digest) + " from " + s.Witness.Testament
		}
		fmt.Fprintf(t, "  slot %s (%s)\t%s\t%s\n", s.Name, s.Mode, s.Status, wit)
		for _, k := range s.Causes {
			what := k.Check
			if what == "" {
				what = "testament " + k.Testament
			}
			fmt.Fprintf(t, "    cause\t%s\t%s on %s (seq %d)\n", k.State, what, orDash(k.Artifact), k.Seq)
		}
		for _, ch := range s.Checks {
			gating := "observe"
			if ch.Gating {
				gating = "required"
			}
			fmt.Fprintf(t, "    check %s\t%s\t%s@%s by %s, phases %s, %d attempt(s)\n", ch.ID, gating, ch.Validator.Name, ch.Validator.Version, ch.Evaluator, phaseList(ch.Phases), ch.Attempts)
			for _, a := range ch.Targets {
				last := ""
				if n := len(a.Results); n > 0 {
					r := a.Results[n-1]
					last = fmt.Sprintf(", last %s", r.Result)
					if r.Note != "" {
						last += " (" + clip(r.Note, 50) + ")"
					}
					last += ", evidence " + r.Evidence
					if r.Late {
						last += " (after the claim ended: audit only)"
					}
				}
				fmt.Fprintf(t, "      on %s @%s\t%s\t%s, handler %d, %d result(s)%s\n", a.Artifact, short12(a.Digest), a.State, a.Phase, a.Handler, len(a.Results), last)
			}
		}
	}
	t.Flush()

	if len(v.Testaments) > 0 {
		fmt.Fprintln(w, "\ntestaments")
		t = newTable(w)
		for _, ts := range v.Testaments {
			var bs []string
			for _, b := range ts.Bindings {
				bs = append(bs, b.Slot+"="+b.Artifact)
			}
			what := ts.Outcome
			if ts.Role == claim.TestamentResult {
				what = "result"
			}
			fmt.Fprintf(t, "  %s\t%s\t%s\tcycle %d\t%s\t%s\n", ts.Testament, ts.State, what, ts.Cycle, strings.Join(bs, " "), clip(ts.Summary, 50))
		}
		t.Flush()
	}
	if len(v.Artifacts) > 0 {
		fmt.Fprintln(w, "\nartifacts")
		t = newTable(w)
		for _, a := range v.Artifacts {
			fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\t%d B\t@%s\tby %s\n", a.Artifact, a.Role, orDash(a.Slot), a.Kind, orDash(a.Name), a.Size, short12(a.Digest), a.Producer)
		}
		t.Flush()
	}
	if len(v.Relations) > 0 {
		fmt.Fprintln(w, "\nrelations")
		t = newTable(w)
		for _, r := range v.Relations {
			holds := "holds"
			if !r.Holds {
				holds = "does not hold yet"
			}
			if !r.Blocking {
				holds = "non-blocking"
			}
			fmt.Fprintf(t, "  %s\t%s\t%s\t%s\n", r.Relation, r.Claim, orDash(string(r.State)), holds)
		}
		t.Flush()
	}
	if len(v.Late) > 0 {
		fmt.Fprintf(w, "\n%d record(s) kept for audit after the claim ended\n", len(v.Late))
	}
}

func byActor(a string) string {
	if a == "" {
		return ""
	}
	return " by " + a
}

func phaseList(ps []claim.Phase) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, "+")
}

// respondentLabel is a claim's respondent, or for a claim posted to a pool
// the seats that may take it until one has.
func respondentLabel(v *claim.View) string {
	if !v.Pooled {
		return v.Respondent
	}
	pool := "any seat"
	if len(v.Pool) > 0 {
		pool = strings.Join(v.Pool, ", ")
	}
	if v.Respondent == "" {
		return "the pool (" + pool + ")"
	}
	return v.Respondent + ", from the pool (" + pool + ")"
}
