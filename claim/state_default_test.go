package claim

import "tally/vocab"

// DefaultConfig returns the configuration NewState uses.
func DefaultConfig() Config { return Config{Timekeeper: vocab.DefaultTimekeeper} }

// NewState returns an empty state with DefaultConfig.
func NewState() *State { return NewStateConfig(DefaultConfig()) }
