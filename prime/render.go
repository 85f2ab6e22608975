package prime

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"tally/api"
	"tally/expect"
	"tally/instant"
	"tally/promise"
	"tally/service"
)

// The bound and the renderings: the text `tally prime` prints and its
// --json document.

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
