package cli

// tally prime: the start-of-session context of a seat, for the hook an
// agent host runs when a session starts (its stdout becomes the session's
// first context). It says what the seat owes, what is owed to it that is
// late, which claims wait on it and which expectations it raised lapsed,
// each with its ids and the next command to act. Two rules shape it:
//
//   - bounded: it fits in --max-tokens (at 4 bytes a token), dropping the
//     lowest-priority items first and saying how many it left out, and
//     where to see them;
//   - stable: the same ledger and --now print the same bytes (every list
//     is sorted on ledger data, every relative time counts from --now), so
//     a host can cache it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/claim"
	"tally/expect"
	"tally/instant"
	"tally/jsondoc"
	"tally/promise"
)

// Limits of prime.
const (
	// primeTokensDefault is the default bound, about a screen of context.
	primeTokensDefault = 1500
	// primeBytesPerToken is the estimate the bound is counted in.
	primeBytesPerToken = 4
	// primeClaimsMax is how many of the seat's open claims prime examines
	// (in priority order); the rest are counted as left out. Over
	// TALLY_URL each costs a request.
	primeClaimsMax = 64
)

// primeOptions are prime's flags.
type primeOptions struct {
	now       string
	seat      string
	maxTokens int
}

func newPrime(g *global) *cobra.Command {
	o := primeOptions{}
	c := &cobra.Command{
		Use:   "prime [--seat WHO] [--max-tokens N] [--now TIME]",
		Short: "The start-of-session context of a seat: what it owes and is owed, the claims waiting on it, with the commands to act",
		Long: `tally prime prints what a seat (the acting identity, or --seat) must know when a session of it
starts: what it owes (overdue first, then by deadline), what is owed to it that is late, the
claims waiting on it (as respondent, evaluator or claimant) and the expectations it raised that
lapsed, each with its ids and the next command to act. Wire it into an agent host's
session-start hook (see docs/AGENTS.md). The output fits in --max-tokens (4 bytes a token):
the lowest-priority items are left out first, and it says how many and where to list them.
The same ledger and --now print the same bytes. tally owed --format prime prints the same.`,
		Example: `  tally prime --as reviewer
  TALLY_ACTOR=reviewer tally prime --max-tokens 800
  tally prime --seat author --now 2026-09-02T10:00:00Z --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return g.runPrime(c.Context(), o) },
	}
	f := c.Flags()
	f.StringVar(&o.seat, "seat", "", "the seat to prime (default: the acting identity, --as or $TALLY_ACTOR; over TALLY_URL the token's)")
	f.IntVar(&o.maxTokens, "max-tokens", primeTokensDefault, "bound on the output, estimated at 4 bytes a token; the lowest-priority items are left out first")
	f.StringVar(&o.now, "now", "", "evaluate at this RFC 3339 time instead of the clock (output is then byte-for-byte reproducible)")
	return c
}

// addPrimeCommands adds tally prime.
func addPrimeCommands(root *cobra.Command, g *global) { root.AddCommand(newPrime(g)) }

// primeData is what prime reads from the ledger.
type primeData struct {
	owes       []promise.View // open promises the seat owes
	owedLate   []promise.View // overdue promises owed to the seat by others
	claims     []claim.View   // open claims it takes part in, at most primeClaimsMax
	claimsMore int            // open claims it takes part in that were not examined
	expects    []expect.View  // open expectations (all raisers; filtered later)
}

func (g *global) runPrime(ctx context.Context, o primeOptions) error {
	if o.maxTokens < 1 {
		return usagef("max-tokens: must be a positive number of tokens (got %d)", o.maxTokens)
	}
	if o.seat != "" && strings.TrimSpace(o.seat) == "" {
		return usagef("seat: must not be blank")
	}
	now, err := parseNow(o.now, g.io.Now)
	if err != nil {
		return err
	}
	seat := o.seat
	switch {
	case seat != "":
	case g.remoteURL() != "":
		// Over TALLY_URL the seat is the token's identity, as the server says.
		id, err := g.identity(ctx)
		if err != nil {
			return err
		}
		seat = id.Actor
	default:
		if seat = g.actor(); seat == "" {
			return usagef("seat: required: pass --seat WHO or --as WHO, or set TALLY_ACTOR")
		}
	}
	d, err := g.primeData(ctx, seat, now)
	if err != nil {
		return err
	}
	p := buildPrime(seat, now, d)
	keep := p.fit(o.maxTokens * primeBytesPerToken)
	if g.json {
		_, err := g.io.Out.Write(p.json(keep, o.maxTokens))
		return err
	}
	_, err = io.WriteString(g.io.Out, p.text(keep))
	return err
}

// primeData reads what prime shows through the Service: what the seat
// owes, what is owed to it late, the open claims it takes part in (the
// most pressing primeClaimsMax of them, whole) and the open expectations.
func (g *global) primeData(ctx context.Context, seat string, now time.Time) (primeData, error) {
	var d primeData
	svc, err := g.service()
	if err != nil {
		return d, err
	}
	call, err := g.call("", "", now)
	if err != nil {
		return d, err
	}
	owes, err := svc.ListPromises(ctx, call, api.OwedQuery{}.Filter(seat))
	if err != nil {
		return d, err
	}
	late, err := svc.ListPromises(ctx, call, promise.Filter{State: "overdue", To: seat})
	if err != nil {
		return d, err
	}
	d.owes, d.owedLate = owes.Promises, late.Promises
	claims, err := svc.ListClaims(ctx, call, claim.Filter{Open: true, Participant: seat})
	if err != nil {
		return d, err
	}
	list := claims.Claims
	sortClaimSummaries(list)
	for i, s := range list {
		if i == primeClaimsMax {
			d.claimsMore = len(list) - i
			break
		}
		shown, err := svc.Claim(ctx, call, s.Claim)
		if err != nil {
			return d, err
		}
		d.claims = append(d.claims, shown.Claim)
	}
	expects, err := svc.ListExpectations(ctx, call, expect.Filter{State: "open"})
	if err != nil {
		return d, err
	}
	d.expects = expects.Expectations
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

// The sections of prime, in the order they print. Stored in --json
// documents: do not rename.
const (
	primeOwes     = "owes"
	primeOwedLate = "owed_late"
	primeClaims   = "claims"
	primeLapsed   = "lapsed"
)

var primeSectionOrder = [...]string{primeOwes, primeOwedLate, primeClaims, primeLapsed}

// primeItem is one thing the seat should know, with the commands to act.
type primeItem struct {
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
	tierConditional
)

// primeSection is one section's totals and its pointer to the full list.
type primeSection struct {
	total   int
	overdue int    // owes only
	more    string // the command that lists all of them
	extra   int    // counted as left out without being examined (claims)
}

// primeDoc is prime's content before the bound is applied.
type primeDoc struct {
	seat     string
	now      time.Time
	items    []primeItem // in print order within each section
	order    []int       // indices of items, highest priority first
	sections map[string]*primeSection
}

func buildPrime(seat string, now time.Time, d primeData) *primeDoc {
	p := &primeDoc{seat: seat, now: now, sections: map[string]*primeSection{
		primeOwes:     {more: "tally owed --as " + shellWord(seat)},
		primeOwedLate: {more: "tally ls --overdue --to " + shellWord(seat)},
		primeClaims:   {more: "tally claim ls --open --participant " + shellWord(seat)},
		primeLapsed:   {more: "tally lapses"},
	}}
	sortOwed(d.owes)
	for i := range d.owes {
		v := &d.owes[i]
		it := primeItem{section: primeOwes, ID: v.ID, State: string(v.State), Overdue: v.Overdue, Party: v.To, What: v.Promise, When: due(v, now)}
		id := shellWord(v.ID)
		switch {
		case v.Overdue:
			it.tier = tierOverdue
			p.sections[primeOwes].overdue++
		case v.State == promise.Owed:
			it.tier = tierOwed
		default:
			it.tier = tierConditional
		}
		if v.State == promise.Owed {
			it.Due = instant.Format(v.Until)
			it.Next = []string{"tally resolve " + id + " --satisfied --evidence REF"}
			it.Or = []string{"tally amend " + id + " --until WHEN --reason TEXT"}
		} else {
			it.Next = []string{"tally show " + shellWord(v.On)}
			it.Or = []string{"tally resolve " + id + " --cancelled --reason TEXT"}
		}
		p.add(it)
	}
	sort.SliceStable(d.owedLate, func(i, j int) bool {
		a, b := &d.owedLate[i], &d.owedLate[j]
		if !a.Until.Equal(b.Until) {
			return a.Until.Before(b.Until)
		}
		return a.Seq < b.Seq
	})
	for i := range d.owedLate {
		v := &d.owedLate[i]
		if v.By == seat {
			continue // a promise to itself is already among what it owes
		}
		id := shellWord(v.ID)
		p.add(primeItem{section: primeOwedLate, tier: tierOwedLate, ID: v.ID, State: string(v.State), Overdue: true, Due: instant.Format(v.Until),
			When: due(v, now), Party: v.By, What: v.Promise,
			Next: []string{"tally assess " + id + " --violated --note TEXT"}, Or: []string{"tally resolve " + id + " --released --reason TEXT"}})
	}
	for i := range d.claims {
		for _, it := range claimWaits(&d.claims[i], seat, now) {
			p.add(it)
		}
	}
	p.sections[primeClaims].extra = d.claimsMore
	for i := range d.expects {
		v := &d.expects[i]
		if v.By != seat || v.State != "open" || len(v.Lapses) == 0 {
			continue
		}
		id := shellWord(v.ExpectationID)
		p.add(primeItem{section: primeLapsed, tier: tierLapsed, ID: v.ExpectationID, State: v.State, Overdue: true,
			Due: instant.Format(v.CurrentDue), When: lapsedWhen(v.Lapses, now),
			What: v.Kind + " on " + v.Subject.String(),
			Next: []string{"tally expect supersede " + id + " --id NEW --due WHEN"},
			Or:   []string{"tally expect withdraw " + id + " --reason TEXT", "tally fact " + shellWord(v.SatisfiedBy.FactKey) + " --subject " + shellWord(v.Subject.String()) + " --at WHEN"}})
	}
	p.order = make([]int, len(p.items))
	for i := range p.order {
		p.order[i] = i
	}
	sort.SliceStable(p.order, func(i, j int) bool { return p.items[p.order[i]].tier < p.items[p.order[j]].tier })
	return p
}

func (p *primeDoc) add(it primeItem) {
	p.items = append(p.items, it)
	p.sections[it.section].total++
}

// claimWaits lists what an open claim waits on seat for: as respondent a
// receipt to acquire, work to publish and a testament to close or post; as
// evaluator each gating check to begin or report on each candidate; as
// claimant the claim to post and a posted testament to receive.
func claimWaits(v *claim.View, seat string, now time.Time) []primeItem {
	if v.Terminal != nil {
		return nil
	}
	id := shellWord(v.Claim)
	base := primeItem{section: primeClaims, tier: tierClaim, ID: v.Claim, State: string(v.State), Overdue: v.Overdue, Due: v.Deadline, What: v.Work}
	if d, err := time.Parse(time.RFC3339Nano, v.Deadline); err == nil {
		base.When = "due " + relative(d, now)
		if v.Overdue {
			base.When = "overdue " + short(since(d, now))
		}
	}
	var out []primeItem
	wait := func(role, action string, next, or []string) {
		it := base
		it.Role, it.Action, it.Next, it.Or = role, action, next, or
		out = append(out, it)
	}
	if v.State == claim.Generated && v.Claimant == seat {
		wait("claimant", "post the claim", []string{"tally claim post " + id}, nil)
	}
	if v.State == claim.Posted && v.Respondent == seat {
		wait("respondent", "acquire the execution receipt", []string{"tally receipt acquire " + id}, []string{"tally receipt acquire " + id + " --decline --reason TEXT"})
	}
	pending := false // a response testament closed or posted, not yet received
	for _, t := range v.Testaments {
		if t.Role != claim.TestamentResponse || t.State == "Received" {
			continue
		}
		pending = true
		tid := shellWord(t.Testament)
		if t.State == "Generated" && t.Author == seat {
			wait("respondent", "post testament "+t.Testament, []string{"tally testament post " + id + " " + tid}, nil)
		}
		if t.State == "Posted" && v.Claimant == seat {
			wait("claimant", "receive testament "+t.Testament, []string{"tally testament receive " + id + " " + tid}, nil)
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
		close := "tally testament close " + id + " --id TESTAMENT --generation " + gen + " --outcome complete --summary TEXT"
		for i, name := range required {
			art := "ARTIFACT" // one placeholder per slot
			if len(required) > 1 {
				art += strconv.Itoa(i + 1)
			}
			puts = append(puts, "tally artifact put FILE --claim "+id+" --slot "+shellWord(name)+" --generation "+gen+" --id "+art)
			close += " --bind " + shellWord(name) + "=" + art
		}
		wait("respondent", fmt.Sprintf("publish the work and close a testament (work cycle %d of %d)", v.Cycles+1, v.MaxResponses),
			append(puts, close, "tally testament post "+id+" TESTAMENT"), nil)
	}
	evaluator := map[string]string{}
	for _, s := range v.Slots {
		for _, ch := range s.Checks {
			evaluator[ch.ID] = ch.Evaluator
		}
	}
	for _, r := range v.Why {
		if r.Kind != claim.ReasonSlot {
			continue
		}
		for _, t := range r.Targets {
			for _, ch := range t.Checks {
				if evaluator[ch.Check] != seat {
					continue
				}
				on := " --claim " + id + " --artifact " + shellWord(t.Artifact)
				report := "tally check report " + shellWord(ch.Check) + on + " --result pass|fail|incomplete|error --evidence-file FILE"
				switch ch.State {
				case "missing":
					wait("evaluator", "check "+ch.Check+" on "+t.Artifact+" in slot "+r.Name,
						[]string{"tally check begin " + shellWord(ch.Check) + on, report},
						[]string{"tally check run " + shellWord(ch.Check) + on + " --command CMD"})
				case "running":
					wait("evaluator", "report check "+ch.Check+" on "+t.Artifact+" in slot "+r.Name+" (begun)", []string{report}, nil)
				}
			}
		}
	}
	return out
}

// fit returns which items fit in limit bytes: the longest run of items in
// priority order whose text does. The header and the lines saying what was
// left out are always printed, so a bound smaller than they are prints
// only them.
func (p *primeDoc) fit(limit int) []bool {
	keep := func(k int) []bool {
		b := make([]bool, len(p.items))
		for _, i := range p.order[:k] {
			b[i] = true
		}
		return b
	}
	// Each item costs at least its own lines, so the sum of their sizes
	// bounds k from above; walk down from there (a bounded walk).
	k, size := 0, len(p.text(keep(0)))
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
	fits := func(k int) bool { return len(p.text(keep(k))) <= limit }
	for k > 0 && !fits(k) {
		k--
	}
	for k < len(p.order) && fits(k+1) {
		k++
	}
	return keep(k)
}

func (p *primeDoc) itemSize(i int) int {
	var b strings.Builder
	p.writeItem(&b, &p.items[i])
	return b.Len()
}

func (p *primeDoc) text(keep []bool) string {
	var b strings.Builder
	seat := p.seat
	fmt.Fprintf(&b, "# tally prime: %s, as of %s\n", seat, instant.Format(p.now))
	sec := p.sections
	if sec[primeOwes].total+sec[primeOwedLate].total+sec[primeClaims].total+sec[primeClaims].extra+sec[primeLapsed].total == 0 {
		fmt.Fprintf(&b, "%s owes nothing open, nothing owed to it is late, no claim waits on it, and no expectation it raised has lapsed.\n", seat)
		return b.String()
	}
	fmt.Fprintf(&b, "%s owes %d open promise(s), %d overdue; is owed %d late promise(s); %d claim step(s) wait on it; %d expectation(s) it raised lapsed.\n",
		seat, sec[primeOwes].total, sec[primeOwes].overdue, sec[primeOwedLate].total, sec[primeClaims].total, sec[primeLapsed].total)
	fmt.Fprintf(&b, "Act as %s (--as, TALLY_ACTOR or its token); CAPITALS are placeholders.\n", seat)
	var pointers strings.Builder // the sections none of whose items fit
	for _, name := range primeSectionOrder {
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
			fmt.Fprintf(&b, "\n## %s\n%s", primeTitle(name, seat), items.String())
			w = &b
		}
		if left > 0 {
			fmt.Fprintf(w, "… and %d more: %s\n", left, s.more)
		}
		if s.extra > 0 {
			fmt.Fprintf(w, "… and %d more open claim(s) it takes part in, not examined: %s\n", s.extra, s.more)
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
	s := "lapsed (" + string(last.Lapse) + ") " + relative(last.LapsedAt, now)
	if len(ls) > 1 {
		s += fmt.Sprintf(", %d lapses", len(ls))
	}
	return s
}

func primeTitle(section, seat string) string {
	switch section {
	case primeOwes:
		return "What " + seat + " owes"
	case primeOwedLate:
		return "Owed to " + seat + ", late"
	case primeClaims:
		return "Claims waiting on " + seat
	}
	return "Expectations " + seat + " raised that lapsed"
}

func (p *primeDoc) writeItem(b *strings.Builder, it *primeItem) {
	b.WriteString("- ")
	b.WriteString(it.ID)
	switch it.section {
	case primeOwes:
		fmt.Fprintf(b, " to %s, %s", it.Party, it.When)
	case primeOwedLate:
		fmt.Fprintf(b, " by %s, %s", it.Party, it.When)
	case primeClaims:
		fmt.Fprintf(b, " as %s (%s", it.Role, it.State)
		if it.When != "" {
			b.WriteString(", " + it.When)
		}
		fmt.Fprintf(b, "): %s; work", it.Action)
	case primeLapsed:
		fmt.Fprintf(b, " %s, due %s", it.When, it.Due)
	}
	if it.Due != "" && (it.section == primeOwes || it.section == primeOwedLate) {
		fmt.Fprintf(b, " (until %s)", it.Due)
	}
	fmt.Fprintf(b, ": %s\n", clip(it.What, 100))
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

// json is prime's --json document: the same items the text keeps, each
// section with its total, what was left out and where to list it.
func (p *primeDoc) json(keep []bool, maxTokens int) []byte {
	type section struct {
		Total   int         `json:"total"`
		Overdue *int        `json:"overdue,omitempty"`
		Items   []primeItem `json:"items"`
		LeftOut int         `json:"left_out"`
		Unread  int         `json:"not_examined,omitempty"` // claims beyond the ones prime reads
		More    string      `json:"more"`
	}
	ms := []jsondoc.Member{member("seat", jsonString(p.seat)), member("now", jsonString(instant.Format(p.now))),
		member("max_tokens", []byte(strconv.Itoa(maxTokens)))}
	for _, name := range primeSectionOrder {
		s := p.sections[name]
		sec := section{Total: s.total, Items: []primeItem{}, Unread: s.extra, More: s.more}
		if name == primeOwes {
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
		ms = append(ms, member(name, b))
	}
	return jsondoc.Doc(ms...)
}

// shellWord is s as one word of a POSIX shell command: as is when it holds
// only characters no shell treats specially, else single-quoted.
func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
