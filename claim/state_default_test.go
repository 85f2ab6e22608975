package claim

// timekeeperActor is the identity these tests tell the core is the timekeeper's:
// ledger.timekeeperActor, which a test of this package cannot import.
const timekeeperActor = "tally/timekeeper"

// DefaultConfig returns the configuration NewState uses.
func DefaultConfig() Config { return Config{Timekeeper: timekeeperActor} }

// NewState returns an empty state with DefaultConfig.
func NewState() *State { return NewStateConfig(DefaultConfig()) }
