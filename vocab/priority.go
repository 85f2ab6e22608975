package vocab

// Priorities of work, as beads users know them: 0 is the highest, 4 the
// lowest, and work that records none has DefaultPriority.
const (
	DefaultPriority = 2
	MaxPriority     = 4
)
