package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Tolerance is what failures a group's voters survive with a quorum
// left: counted from its live voters, so a voter already dead is a
// failure already spent.
type Tolerance struct {
	Voters  int `json:"voters"`
	Dead    int `json:"dead,omitempty"`
	Zones   int `json:"zones"`
	Regions int `json:"regions,omitempty"` // 0 when no voter has a region label
	// SurvivesNodes, SurvivesZones and SurvivesRegions are how many of
	// each can fail, whichever they are, with a quorum left.
	SurvivesNodes   int `json:"survives_nodes"`
	SurvivesZones   int `json:"survives_zones"`
	SurvivesRegions int `json:"survives_regions,omitempty"`
	// FatalZones and FatalRegions are those whose loss alone loses the
	// quorum.
	FatalZones   []string `json:"fatal_zones,omitempty"`
	FatalRegions []string `json:"fatal_regions,omitempty"`
	Summary      string   `json:"summary"`
}

// Tolerate is the tolerance of a group with these voters.
func Tolerate(nodes []Node, voters []uint64) Tolerance {
	byID := make(map[uint64]Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	t := Tolerance{Voters: len(voters)}
	if len(voters) == 0 {
		t.Summary = "no voters"
		return t
	}
	quorum := len(voters)/2 + 1
	zones, regions := map[string]int{}, map[string]int{}
	zoneName := map[string]string{}
	labelled := false
	alive := 0
	for _, id := range voters {
		n, ok := byID[id]
		if !ok || n.Dead {
			t.Dead++
			continue
		}
		alive++
		key := n.Region + "\x00" + n.Zone
		zones[key]++
		zoneName[key] = label(n.Zone)
		regions[n.Region]++
		labelled = labelled || n.Region != ""
	}
	spare := max(alive-quorum, -1)
	t.SurvivesNodes = max(spare, 0)
	t.Zones = len(zones)
	t.SurvivesZones, t.FatalZones = domains(zones, zoneName, spare)
	if labelled {
		t.Regions = len(regions)
		names := map[string]string{}
		for r := range regions {
			names[r] = label(r)
		}
		t.SurvivesRegions, t.FatalRegions = domains(regions, names, spare)
	}
	t.Summary = t.summary(labelled)
	return t
}

// domains is how many of the largest domains can be lost within spare
// voters, and which domains alone hold more than spare.
func domains(count map[string]int, name map[string]string, spare int) (int, []string) {
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(name[a], name[b])) })
	lost, n := 0, 0
	var fatal []string
	for _, k := range keys {
		if count[k] > spare {
			fatal = append(fatal, name[k])
		}
	}
	for _, k := range keys {
		if lost+count[k] > spare {
			break
		}
		lost += count[k]
		n++
	}
	slices.Sort(fatal)
	return n, fatal
}

func (t Tolerance) summary(regions bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d voter%s in %d zone%s", t.Voters, plural(t.Voters), t.Zones, plural(t.Zones))
	if regions {
		fmt.Fprintf(&b, ", %d region%s", t.Regions, plural(t.Regions))
	}
	if t.Dead > 0 {
		fmt.Fprintf(&b, " (%d dead)", t.Dead)
	}
	var items []string
	if t.SurvivesNodes > 0 {
		items = append(items, fmt.Sprintf("%d node%s", t.SurvivesNodes, plural(t.SurvivesNodes)))
	}
	if t.SurvivesZones > 0 {
		items = append(items, fmt.Sprintf("%d zone%s", t.SurvivesZones, plural(t.SurvivesZones)))
	}
	if t.SurvivesRegions > 0 {
		items = append(items, fmt.Sprintf("%d region%s", t.SurvivesRegions, plural(t.SurvivesRegions)))
	}
	clauses := []string{"survives no failure"}
	if len(items) > 0 {
		clauses[0] = "survives " + joinOr(items)
	}
	if len(t.FatalZones) > 0 {
		clauses = append(clauses, "losing zone "+joinOr(t.FatalZones)+" loses quorum")
	}
	if len(t.FatalRegions) > 0 {
		clauses = append(clauses, "losing region "+joinOr(t.FatalRegions)+" loses quorum")
	}
	return b.String() + ": " + strings.Join(clauses, "; ")
}

// label names a zone or region, an empty label as such.
func label(s string) string {
	if s == "" {
		return "(unlabelled)"
	}
	return s
}

// joinOr is "a", "a or b", "a, b or c".
func joinOr(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
