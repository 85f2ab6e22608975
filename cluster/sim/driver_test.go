package sim

import (
	"strings"
	"testing"
)

// TestSimDriverRunsHeal: the driver's seeds (every sixteenth) run the
// real placement driver with the operator's requests among the faults;
// over a handful of them, nodes are added, marked dead and drained, and
// each run ends with every group at its goal and the meta group's records
// agreeing with the groups; some of the changes are joint (promote and
// remove at once).
func TestSimDriverRunsHeal(t *testing.T) {
	defer simGC()()
	var total Stats
	for i := uint64(1); i <= 6; i++ {
		opt := optionsFor(16 * i)
		if !opt.Driver {
			t.Fatalf("seed %d is not a driver run", opt.Seed)
		}
		st, err := runSeed(t, opt)
		if err != nil {
			t.Fatalf("%v\nreplay: go test ./cluster/sim -run 'TestSim$' -seed %d -v", err, opt.Seed)
		}
		total.Added += st.Added
		total.MarkedDead += st.MarkedDead
		total.Drained += st.Drained
		total.Decisions += st.Decisions
		total.Joint += st.Joint
	}
	if total.Added == 0 || total.MarkedDead == 0 || total.Drained == 0 || total.Decisions == 0 || total.Joint == 0 {
		t.Fatalf("the driver's runs no longer add, mark dead and drain, decide, or make a joint change: %+v", total)
	}
	t.Logf("%d decisions, %d joint changes, %d nodes added, %d marked dead, %d drained", total.Decisions, total.Joint, total.Added, total.MarkedDead, total.Drained)
}

// TestSimCatchesUnrecordedDriver breaks the driver (it never records a
// group's configuration in the meta group) and requires the end's check
// that the driver's records and the groups' configurations agree to
// catch it.
func TestSimCatchesUnrecordedDriver(t *testing.T) {
	defer simGC()()
	opt := optionsFor(16)
	opt.driverDropsRecords = true
	_, err := runSeed(t, opt)
	if err == nil || !strings.Contains(err.Error(), "driver: the meta group records group") {
		t.Fatalf("a driver that records no configuration: %v", err)
	}
	t.Logf("caught: %v", err)
}
