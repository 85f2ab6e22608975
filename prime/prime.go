// Package prime renders the start-of-session context of a seat: what it
// owes, what is owed to it that is late, which claims wait on it (open, or
// failed and not yet answered), which expectations it raised lapsed or are
// past due, and which facts are expected of it, each with its ids and the
// commands to act. `tally prime`, `tally owed --format prime`, the MCP tool
// tally_prime and the MCP prompt resume_seat all print it, through any
// service.Service, so they print the same bytes. Two rules shape it:
//
//   - bounded: it fits in a number of tokens (at 4 bytes a token), dropping
//     the lowest-priority items first and saying how many it left out, and
//     where to see them;
//   - stable: the same ledger and now print the same bytes (every list is
//     sorted on ledger data, every relative time counts from now), so a
//     host can cache it.
//
// Every command it prints runs as printed in the seat's shell: it carries
// --session when the session is not the default and --as when the seat is
// not the identity the shell's environment gives (Commands).
package prime

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"tally/api"
	"tally/checkrun"
	"tally/claim"
	"tally/expect"
	"tally/instant"
	"tally/promise"
	"tally/rest"
	"tally/service"
)

// Limits of prime.
const (
	// TokensDefault is the default bound, about a screen of context.
	TokensDefault = 1500
	// BytesPerToken is the estimate the bound is counted in.
	BytesPerToken = 4
	// ClaimsMax is how many of the seat's open claims prime examines (in
	// priority order); the rest are counted as left out. Over TALLY_URL
	// each costs a request.
	ClaimsMax = 64
	// FailedMax is how many of the claims that failed, with the seat as
	// claimant or respondent, prime examines for a successor, newest
	// first; older ones are counted as not examined.
	FailedMax = 16
)

// Commands says what every printed command carries so that it runs as
// printed in the seat's shell.
type Commands struct {
	// Session is TENANT/SESSION when the session is not the default, else "".
	Session string
	// As is the seat when the shell's environment does not name it
	// (TALLY_ACTOR, or a token's identity), else "".
	As string
}

// Flags are the global flags of c, each followed by a space: "" when none.
func (c Commands) Flags() string {
	var b strings.Builder
	if c.Session != "" {
		b.WriteString("--session " + service.ShellWord(c.Session) + " ")
	}
	if c.As != "" {
		b.WriteString("--as " + service.ShellWord(c.As) + " ")
	}
	return b.String()
}

// Tally is the command line "tally FLAGS rest": rest as printed, run as c says.
func (c Commands) Tally(rest string) string { return "tally " + c.Flags() + rest }

// Data is what prime reads from the ledger.
type Data struct {
	Owes       []promise.View // open promises the seat owes
	OwedLate   []promise.View // overdue promises owed to the seat by others
	Claims     []claim.View   // open or unanswered failed claims it takes part in, at most ClaimsMax
	ClaimsMore int            // open claims that were not examined
	FailedMore int            // failed claims that were not examined
	Expects    []expect.View  // open expectations (all raisers; filtered later)
}

// failures are the terminal states in which a claim failed: its claimant
// answers each with a successor claim (or lets it go).
var failures = []claim.Status{
	claim.PostFailed, claim.ReceiptFailed, claim.TestamentGenerationFailed,
	claim.ValidationIncomplete, claim.ValidationFailed, claim.ValidationErrored,
	claim.Expired, claim.DependencyFailed, claim.Deadlocked,
}

// Read reads what prime shows through svc, in c's session at c.Now: what
// the seat owes, what is owed to it late, the open claims it takes part in
// and the failed ones not yet answered by a successor (the most pressing
// ClaimsMax of them, whole) and the open expectations. A session without
// a log reads as empty.
func Read(ctx context.Context, svc service.Service, c service.Call, seat string) (Data, error) {
	var d Data
	d, err := read(ctx, svc, c, seat)
	if err != nil && rest.Refuse(err).Code == string(service.CodeNoSuchSession) {
		return Data{}, nil
	}
	return d, err
}

func read(ctx context.Context, svc service.Service, c service.Call, seat string) (Data, error) {
	var d Data
	owes, err := svc.ListPromises(ctx, c, api.OwedQuery{}.Filter(seat))
	if err != nil {
		return d, err
	}
	late, err := svc.ListPromises(ctx, c, promise.Filter{State: "overdue", To: seat})
	if err != nil {
		return d, err
	}
	d.Owes, d.OwedLate = owes.Promises, late.Promises
	open, err := svc.ListClaims(ctx, c, claim.Filter{Open: true, Participant: seat})
	if err != nil {
		return d, err
	}
	failed, err := svc.ListClaims(ctx, c, claim.Filter{States: failures, Participant: seat})
	if err != nil {
		return d, err
	}
	list := open.Claims
	sortClaimSummaries(list)
	for i, s := range list {
		if i == ClaimsMax {
			d.ClaimsMore = len(list) - i
			break
		}
		shown, err := svc.Claim(ctx, c, s.Claim)
		if err != nil {
			return d, err
		}
		d.Claims = append(d.Claims, shown.Claim)
	}
	// A failed claim matters to its claimant and respondent only, until a
	// successor answers it: the newest are examined, a bounded number.
	examined := 0
	for i := len(failed.Claims) - 1; i >= 0; i-- {
		s := failed.Claims[i]
		if s.Claimant != seat && s.Respondent != seat {
			continue
		}
		if examined == FailedMax {
			d.FailedMore++
			continue
		}
		examined++
		shown, err := svc.Claim(ctx, c, s.Claim)
		if err != nil {
			return d, err
		}
		if len(shown.Claim.Successors) == 0 {
			d.Claims = append(d.Claims, shown.Claim)
		}
	}
	expects, err := svc.ListExpectations(ctx, c, expect.Filter{State: "open"})
	if err != nil {
		return d, err
	}
	d.Expects = expects.Expectations
	return d, nil
}

// sortClaimSummaries puts the claims most pressing first: overdue, then by
// deadline (none last), then in creation order.
func sortClaimSummaries(list []claim.Summary) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Overdue != b.Overdue {
			return a.Overdue
		}
		if (a.Deadline == "") != (b.Deadline == "") {
			return a.Deadline != ""
		}
		if a.Deadline != b.Deadline {
			ta, _ := time.Parse(time.RFC3339Nano, a.Deadline)
			tb, _ := time.Parse(time.RFC3339Nano, b.Deadline)
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
		}
		return a.CreatedSeq < b.CreatedSeq
	})
}

// Text is the context of seat in c's session at c.Now, bounded to
// maxTokens, as `tally prime` prints it.
func Text(ctx context.Context, svc service.Service, c service.Call, seat string, cmds Commands, maxTokens int) (string, error) {
	d, err := Read(ctx, svc, c, seat)
	if err != nil {
		return "", err
	}
	p := Build(seat, c.Now, d, cmds)
	return p.Text(p.Fit(maxTokens * BytesPerToken)), nil
}

// The sections of prime, in the order they print. Stored in --json
// documents: do not rename.
const (
	SectionOwes     = "owes"
	SectionOwedLate = "owed_late"
	SectionClaims   = "claims"
	SectionLapsed   = "lapsed"
	SectionExpected = "expected"
)

// SectionOrder is the order the sections print in.
var SectionOrder = [...]string{SectionOwes, SectionOwedLate, SectionClaims, SectionLapsed, SectionExpected}

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

// Fit returns which items fit in limit bytes: the longest run of items in
// priority order whose text does. The header and the lines saying what was
// left out are always printed, so a bound smaller than they are prints
// only them.
func (p *Doc) Fit(limit int) []bool {
	keep := func(k int) []bool {
		b := make([]bool, len(p.items))
		for _, i := range p.order[:k] {
			b[i] = true
		}
		return b
	}
	// Each item costs at least its own lines, so the sum of their sizes
	// bounds k from above; walk down from there (a bounded walk).
	k, size := 0, len(p.Text(keep(0)))
	for k < len(p.order) {
		size += p.itemSize(p.order[k])
		if size > limit {
			break
		}
		k++
	}
	// The estimate counts the pointer lines of the skeleton, which go as
	// items come back, and not the section titles, which come with them:
	// settle it both ways on the real text.
	fits := func(k int) bool { return len(p.Text(keep(k))) <= limit }
	for k > 0 && !fits(k) {
		k--
	}
	for k < len(p.order) && fits(k+1) {
		k++
	}
	return keep(k)
}

func (p *Doc) itemSize(i int) int {
	var b strings.Builder
	p.writeItem(&b, &p.items[i])
	return b.Len()
}

// Text is the context with the items keep marks.
func (p *Doc) Text(keep []bool) string {
	var b strings.Builder
	seat := p.seat
	fmt.Fprintf(&b, "# tally prime: %s, as of %s\n", seat, instant.Format(p.now))
	sec := p.sections
	if sec[SectionOwes].total+sec[SectionOwedLate].total+sec[SectionClaims].total+sec[SectionClaims].extra+sec[SectionClaims].failed+sec[SectionLapsed].total+sec[SectionExpected].total == 0 {
		fmt.Fprintf(&b, "%s owes nothing open, nothing owed to it is late, no claim waits on it, and no expectation it raised has lapsed.\n", seat)
		return b.String()
	}
	fmt.Fprintf(&b, "%s owes %d open promise(s), %d overdue; is owed %d late promise(s); %d claim step(s) wait on it; %d expectation(s) it raised lapsed",
		seat, sec[SectionOwes].total, sec[SectionOwes].overdue, sec[SectionOwedLate].total, sec[SectionClaims].total, sec[SectionLapsed].total)
	if n := sec[SectionExpected].total; n > 0 {
		fmt.Fprintf(&b, "; %d fact(s) are expected of it", n)
	}
	b.WriteString(".\n")
	switch {
	case p.cmds.As != "":
		fmt.Fprintf(&b, "Act as %s (each command says --as); CAPITALS are placeholders.\n", seat)
	default:
		fmt.Fprintf(&b, "Act as %s (--as, TALLY_ACTOR or its token); CAPITALS are placeholders.\n", seat)
	}
	var pointers strings.Builder // the sections none of whose items fit
	for _, name := range SectionOrder {
		s := sec[name]
		var items strings.Builder
		left := 0
		for i := range p.items {
			if it := &p.items[i]; it.section == name {
				if keep[i] {
					p.writeItem(&items, it)
				} else {
					left++
				}
			}
		}
		w := &pointers
		if items.Len() > 0 {
			fmt.Fprintf(&b, "\n## %s\n%s", title(name, seat), items.String())
			w = &b
		}
		if left > 0 {
			fmt.Fprintf(w, "… and %d more: %s\n", left, s.more)
		}
		if s.extra > 0 {
			fmt.Fprintf(w, "… and %d more open claim(s) it takes part in, not examined: %s\n", s.extra, s.more)
		}
		if s.failed > 0 {
			fmt.Fprintf(w, "… and %d older failed claim(s) it took part in, not examined for a successor: %s\n", s.failed,
				p.cmds.Tally("claim ls --participant "+service.ShellWord(p.seat)))
		}
	}
	if pointers.Len() > 0 {
		b.WriteByte('\n')
		b.WriteString(pointers.String())
	}
	return b.String()
}

// lapsedWhen says when the last of an expectation's lapses happened, and
// how many there were.
func lapsedWhen(ls []expect.LapseView, now time.Time) string {
	last := ls[len(ls)-1]
	s := "lapsed (" + string(last.Lapse) + ") " + instant.Relative(last.LapsedAt, now)
	if len(ls) > 1 {
		s += fmt.Sprintf(", %d lapses", len(ls))
	}
	return s
}

func title(section, seat string) string {
	switch section {
	case SectionOwes:
		return "What " + seat + " owes"
	case SectionOwedLate:
		return "Owed to " + seat + ", late"
	case SectionClaims:
		return "Claims waiting on " + seat
	case SectionExpected:
		return "Facts expected of " + seat
	}
	return "Expectations " + seat + " raised that lapsed"
}

func (p *Doc) writeItem(b *strings.Builder, it *Item) {
	b.WriteString("- ")
	b.WriteString(it.ID)
	switch it.section {
	case SectionOwes:
		fmt.Fprintf(b, " to %s, %s", it.Party, it.When)
	case SectionOwedLate:
		fmt.Fprintf(b, " by %s, %s", it.Party, it.When)
	case SectionClaims:
		fmt.Fprintf(b, " as %s (%s", it.Role, it.State)
		if it.When != "" {
			b.WriteString(", " + it.When)
		}
		fmt.Fprintf(b, "): %s; work", it.Action)
	case SectionLapsed:
		fmt.Fprintf(b, " %s, due %s", it.When, it.Due)
	case SectionExpected:
		fmt.Fprintf(b, " raised by %s, %s (due %s)", it.Party, it.When, it.Due)
	}
	if it.Due != "" && (it.section == SectionOwes || it.section == SectionOwedLate) {
		fmt.Fprintf(b, " (until %s)", it.Due)
	}
	fmt.Fprintf(b, ": %s\n", Clip(it.What, 100))
	for i, n := range it.Next {
		if i == 0 {
			b.WriteString("  next: ")
		} else {
			b.WriteString("  then: ")
		}
		b.WriteString(n)
		b.WriteByte('\n')
	}
	for _, n := range it.Or {
		b.WriteString("  or:   ")
		b.WriteString(n)
		b.WriteByte('\n')
	}
}

// JSON is prime's --json document: the same items the text keeps, each
// section with its total, what was left out and where to list it.
func (p *Doc) JSON(keep []bool, maxTokens int) []byte {
	type sectionDoc struct {
		Total   int    `json:"total"`
		Overdue *int   `json:"overdue,omitempty"`
		Items   []Item `json:"items"`
		LeftOut int    `json:"left_out"`
		Unread  int    `json:"not_examined,omitempty"`        // claims beyond the ones prime reads
		Failed  int    `json:"failed_not_examined,omitempty"` // older failed claims not read for a successor
		More    string `json:"more"`
	}
	ms := []api.Member{api.M("seat", api.S(p.seat)), api.M("now", api.S(instant.Format(p.now))),
		api.M("max_tokens", []byte(strconv.Itoa(maxTokens)))}
	for _, name := range SectionOrder {
		s := p.sections[name]
		sec := sectionDoc{Total: s.total, Items: []Item{}, Unread: s.extra, Failed: s.failed, More: s.more}
		if name == SectionOwes {
			n := s.overdue
			sec.Overdue = &n
		}
		for i := range p.items {
			if it := p.items[i]; it.section == name {
				if keep[i] {
					sec.Items = append(sec.Items, it)
				} else {
					sec.LeftOut++
				}
			}
		}
		b, _ := json.Marshal(sec) // plain strings, ints and slices: cannot fail
		ms = append(ms, api.M(name, b))
	}
	return api.Doc(ms...)
}

// SortOwed orders what a seat owes: overdue first (most overdue first),
// then owed by deadline, then conditional; declaration order breaks ties.
func SortOwed(vs []promise.View) {
	rank := func(v *promise.View) int {
		switch {
		case v.Overdue:
			return 0
		case v.State == promise.Owed:
			return 1
		}
		return 2
	}
	sort.SliceStable(vs, func(i, j int) bool {
		ri, rj := rank(&vs[i]), rank(&vs[j])
		if ri != rj {
			return ri < rj
		}
		if !vs[i].Until.Equal(vs[j].Until) {
			return vs[i].Until.Before(vs[j].Until)
		}
		return vs[i].Seq < vs[j].Seq
	})
}

// Due describes a promise's deadline at now for people.
func Due(v *promise.View, now time.Time) string {
	switch {
	case v.Overdue:
		return "overdue " + instant.Short(instant.Seconds(v.Until, now))
	case v.State == promise.Owed:
		return "due " + instant.Relative(v.Until, now)
	case v.State == promise.Conditional:
		return "waits on " + v.On
	default:
		return string(v.State)
	}
}

// Clip shortens text to n runes on one line.
func Clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
