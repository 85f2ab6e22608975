package prime

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"tally/checkrun"
	"tally/claim"
	"tally/instant"
	"tally/promise"
	"tally/service"
)

// What the seat should know, as items in sections, with the commands to
// act on each.

// Item is one thing the seat should know, with the commands to act.
type Item struct {
	section string
	tier    int // lower is kept longer when the bound trims

	ID      string   `json:"id"`             // promise, claim or expectation id
	Role    string   `json:"role,omitempty"` // claims: respondent, evaluator or claimant
	State   string   `json:"state"`
	Overdue bool     `json:"overdue"`
	Due     string   `json:"due,omitempty"`   // the deadline in force, RFC 3339
	When    string   `json:"when,omitempty"`  // the deadline against now: "overdue 5m", "due in 2h"
	Party   string   `json:"party,omitempty"` // the creditor of what it owes, the debtor of what it is owed
	What    string   `json:"what"`            // the promise, the claim's work, the expectation's kind and subject
	Action  string   `json:"action,omitempty"`
	Next    []string `json:"next"`         // the commands to act, in the order to run them
	Or      []string `json:"or,omitempty"` // other commands that act instead
}

// Trimming tiers: what the seat must do itself comes first, then what
// others owe it, then what waits on something else.
const (
	tierOverdue = iota
	tierClaim
	tierOwed
	tierOwedLate
	tierLapsed
	tierExpected
	tierConditional
)

// section is one section's totals and its pointer to the full list.
type section struct {
	total   int
	overdue int    // owes only
	more    string // the command that lists all of them
	extra   int    // counted as left out without being examined (claims)
	failed  int    // failed claims not examined for a successor
}

// Doc is prime's content before the bound is applied.
type Doc struct {
	seat     string
	now      time.Time
	cmds     Commands
	items    []Item // in print order within each section
	order    []int  // indices of items, highest priority first
	sections map[string]*section
}

// Build lays out what d holds for seat at now, every command as cmds says.
func Build(seat string, now time.Time, d Data, cmds Commands) *Doc {
	sw := service.ShellWord(seat)
	p := &Doc{seat: seat, now: now, cmds: cmds, sections: map[string]*section{
		SectionOwes:     {more: cmds.Tally("owed --as " + sw)},
		SectionOwedLate: {more: cmds.Tally("ls --overdue --to " + sw)},
		SectionClaims:   {more: cmds.Tally("claim ls --open --participant " + sw)},
		SectionLapsed:   {more: cmds.Tally("lapses")},
		SectionExpected: {more: cmds.Tally("expect ls --state open")},
	}}
	t := cmds.Tally
	SortOwed(d.Owes)
	for i := range d.Owes {
		v := &d.Owes[i]
		it := Item{section: SectionOwes, ID: v.ID, State: string(v.State), Overdue: v.Overdue, Party: v.To, What: v.Promise, When: Due(v, now)}
		id := service.ShellWord(v.ID)
		switch {
		case v.Overdue:
			it.tier = tierOverdue
			p.sections[SectionOwes].overdue++
		case v.State == promise.Owed:
			it.tier = tierOwed
		default:
			it.tier = tierConditional
		}
		if v.State == promise.Owed {
			it.Due = instant.Format(v.Until)
			it.Next = []string{t("resolve " + id + " --satisfied --evidence REF")}
			it.Or = []string{t("amend " + id + " --until WHEN --reason TEXT")}
		} else {
			it.Next = []string{t("show " + service.ShellWord(v.On))}
			it.Or = []string{t("resolve " + id + " --cancelled --reason TEXT")}
		}
		p.add(it)
	}
	sort.SliceStable(d.OwedLate, func(i, j int) bool {
		a, b := &d.OwedLate[i], &d.OwedLate[j]
		if !a.Until.Equal(b.Until) {
			return a.Until.Before(b.Until)
		}
		return a.Seq < b.Seq
	})
	for i := range d.OwedLate {
		v := &d.OwedLate[i]
		if v.By == seat {
			continue // a promise to itself is already among what it owes
		}
		id := service.ShellWord(v.ID)
		p.add(Item{section: SectionOwedLate, tier: tierOwedLate, ID: v.ID, State: string(v.State), Overdue: true, Due: instant.Format(v.Until),
			When: Due(v, now), Party: v.By, What: v.Promise,
			Next: []string{t("assess " + id + " --violated --note TEXT")}, Or: []string{t("resolve " + id + " --released --reason TEXT")}})
	}
	for i := range d.Claims {
		for _, it := range claimWaits(&d.Claims[i], seat, now, t) {
			p.add(it)
		}
	}
	p.sections[SectionClaims].extra = d.ClaimsMore
	p.sections[SectionClaims].failed = d.FailedMore
	for i := range d.Expects {
		v := &d.Expects[i]
		if v.State != "open" {
			continue
		}
		id := service.ShellWord(v.ExpectationID)
		fact := t("fact " + service.ShellWord(v.SatisfiedBy.FactKey) + " --subject " + service.ShellWord(v.Subject.String()) + " --at WHEN")
		what := v.Kind + " on " + v.Subject.String()
		if v.By == seat && (len(v.Lapses) > 0 || v.PastDue(now)) {
			it := Item{section: SectionLapsed, tier: tierLapsed, ID: v.ExpectationID, State: v.State, Overdue: true,
				Due: instant.Format(v.CurrentDue), What: what,
				Next: []string{t("expect supersede " + id + " --id NEW --due WHEN")},
				Or:   []string{t("expect withdraw " + id + " --reason TEXT"), fact}}
			if len(v.Lapses) > 0 {
				it.When = lapsedWhen(v.Lapses, now)
			} else {
				it.When = "due passed " + instant.Relative(v.DueBy(), now) + ", lapse not yet recorded"
			}
			p.add(it)
			continue
		}
		if v.Producer == seat && v.By != seat {
			it := Item{section: SectionExpected, tier: tierExpected, ID: v.ExpectationID, State: v.State, Overdue: v.PastDue(now),
				Due: instant.Format(v.CurrentDue), Party: v.By, What: what, Next: []string{fact}}
			it.When = "due " + instant.Relative(v.CurrentDue, now)
			if it.Overdue {
				it.When = "due passed " + instant.Relative(v.DueBy(), now) + ", lapse not yet recorded"
			}
			p.add(it)
		}
	}
	p.order = make([]int, len(p.items))
	for i := range p.order {
		p.order[i] = i
	}
	sort.SliceStable(p.order, func(i, j int) bool { return p.items[p.order[i]].tier < p.items[p.order[j]].tier })
	return p
}

func (p *Doc) add(it Item) {
	p.items = append(p.items, it)
	p.sections[it.section].total++
}

// claimWaits lists what a claim waits on seat for: as respondent a receipt
// to acquire, work to publish and a testament to close or post; as
// evaluator each gating check to begin or report on each candidate; as
// claimant the claim to post and a posted testament to receive. A claim
// that failed waits on its claimant for a successor, and its respondent
// learns why.
func claimWaits(v *claim.View, seat string, now time.Time, t func(string) string) []Item {
	id := service.ShellWord(v.Claim)
	base := Item{section: SectionClaims, tier: tierClaim, ID: v.Claim, State: string(v.State), Overdue: v.Overdue, Due: v.Deadline, What: v.Work}
	if v.Terminal != nil {
		return failedWaits(v, seat, base, t)
	}
	if d, err := time.Parse(time.RFC3339Nano, v.Deadline); err == nil {
		base.When = "due " + instant.Relative(d, now)
		if v.Overdue {
			base.When = "overdue " + instant.Short(instant.Seconds(d, now))
		}
	}
	var out []Item
	wait := func(role, action string, next, or []string) {
		it := base
		it.Role, it.Action, it.Next, it.Or = role, action, next, or
		out = append(out, it)
	}
	if v.State == claim.Generated && v.Claimant == seat {
		wait("claimant", "post the claim", []string{t("claim post " + id)}, nil)
	}
	if v.State == claim.Posted && v.Respondent == seat {
		wait("respondent", "acquire the execution receipt", []string{t("receipt acquire " + id)}, []string{t("receipt acquire " + id + " --decline --reason TEXT")})
	}
	pending := false // a response testament closed or posted, not yet received
	for _, ts := range v.Testaments {
		if ts.Role != claim.TestamentResponse || ts.State == "Received" {
			continue
		}
		pending = true
		tid := service.ShellWord(ts.Testament)
		if ts.State == "Generated" && ts.Author == seat {
			wait("respondent", "post testament "+ts.Testament, []string{t("testament post " + id + " " + tid)}, nil)
		}
		if ts.State == "Posted" && v.Claimant == seat {
			wait("claimant", "receive testament "+ts.Testament, []string{t("testament receive " + id + " " + tid)}, nil)
		}
	}
	if r := v.Receipt; r != nil && r.Holder == seat && v.Delivery.State != "passed" && !pending {
		gen := strconv.FormatUint(r.Generation, 10)
		var required []string
		for _, s := range v.Slots {
			if s.Mode == claim.Required {
				required = append(required, s.Name)
			}
		}
		var puts []string
		close := "testament close " + id + " --id TESTAMENT --generation " + gen + " --outcome complete --summary TEXT"
		for i, name := range required {
			art := "ARTIFACT" // one placeholder per slot
			if len(required) > 1 {
				art += strconv.Itoa(i + 1)
			}
			puts = append(puts, t("artifact put FILE --claim "+id+" --slot "+service.ShellWord(name)+" --generation "+gen+" --id "+art))
			close += " --bind " + service.ShellWord(name) + "=" + art
		}
		wait("respondent", fmt.Sprintf("publish the work and close a testament (work cycle %d of %d)", v.Cycles+1, v.MaxResponses),
			append(puts, t(close), t("testament post "+id+" TESTAMENT")), nil)
	}
	checks := map[string]claim.CheckView{}
	for _, s := range v.Slots {
		for _, ch := range s.Checks {
			checks[ch.ID] = ch
		}
	}
	for _, r := range v.Why {
		if r.Kind != claim.ReasonSlot {
			continue
		}
		for _, tg := range r.Targets {
			for _, ch := range tg.Checks {
				def := checks[ch.Check]
				if def.Evaluator != seat {
					continue
				}
				on := " --claim " + id + " --artifact " + service.ShellWord(tg.Artifact)
				report := t("check report " + service.ShellWord(ch.Check) + on + " --result VERDICT --evidence-file FILE")
				switch ch.State {
				case "missing":
					// check run only for a validator this tally runs;
					// any other is reported by its evaluator.
					var or []string
					if run, ok := runCommand(def.Validator.Name); ok {
						or = []string{t("check run " + service.ShellWord(ch.Check) + on + run)}
					}
					wait("evaluator", "check "+ch.Check+" on "+tg.Artifact+" in slot "+r.Name+" (VERDICT: pass, fail, incomplete or error)",
						[]string{t("check begin " + service.ShellWord(ch.Check) + on), report}, or)
				case "running":
					wait("evaluator", "report check "+ch.Check+" on "+tg.Artifact+" in slot "+r.Name+" (begun; VERDICT: pass, fail, incomplete or error)", []string{report}, nil)
				}
			}
		}
	}
	return out
}

// runCommand is what `tally check run` needs beyond the check and its
// target for the validator name, and whether this tally runs it at all.
func runCommand(validator string) (string, bool) {
	v, ok := checkrun.Lookup(validator)
	if !ok {
		return "", false
	}
	if v.Name() == "command" {
		return " --command CMD", true
	}
	return "", true
}

// failedWaits is what a claim that ended in a failure, with no successor
// yet, asks of seat: its claimant answers it with a successor claim (or
// lets it go); its respondent is told why, and waits on that answer.
func failedWaits(v *claim.View, seat string, base Item, t func(string) string) []Item {
	if !isFailure(v.Terminal.State) || len(v.Successors) > 0 {
		return nil
	}
	id := service.ShellWord(v.Claim)
	why := "failed: " + v.Terminal.Reason
	if v.Terminal.Reason == "" {
		why = "failed"
	}
	var out []Item
	if v.Claimant == seat {
		it := base
		it.Role, it.Action = "claimant", why+"; correct it with a successor claim"
		it.Next = []string{t("claim create NEW --predecessor " + id + " --respondent " + service.ShellWord(v.Respondent) + " --work TEXT")}
		it.Or = []string{t("claim show " + id)}
		out = append(out, it)
	}
	if v.Respondent == seat && v.Claimant != seat {
		it := base
		it.Role, it.Action = "respondent", why+"; its claimant "+v.Claimant+" answers with a successor claim"
		it.Next = []string{t("claim show " + id)}
		out = append(out, it)
	}
	return out
}

func isFailure(s claim.Status) bool {
	for _, f := range failures {
		if f == s {
			return true
		}
	}
	return false
}
