package ledger

import (
	"fmt"
	"sync"
)

// OpenOnce holds ledgers opened once each, by key (a tenant/session),
// until Close: what a process that works on one ledger directory keeps
// (the CLI, tally mcp over stdio). Its zero value is ready to use; it is
// safe for concurrent use.
type OpenOnce struct {
	mu   sync.Mutex
	open map[string]*Ledger
}

// Get returns the ledger held under key, opening it with open the first
// time; an error from open is returned and nothing is held. Calls for one
// key wait for each other, so open runs once for it.
func (o *OpenOnce) Get(key string, open func() (*Ledger, error)) (*Ledger, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l, ok := o.open[key]; ok {
		return l, nil
	}
	l, err := open()
	if err != nil {
		return nil, err
	}
	if o.open == nil {
		o.open = map[string]*Ledger{}
	}
	o.open[key] = l
	return l, nil
}

// Close closes every ledger held and forgets it; it returns the first
// error, naming its key.
func (o *OpenOnce) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var first error
	for key, l := range o.open {
		if err := l.Close(); err != nil && first == nil {
			first = fmt.Errorf("close session %s: %w", key, err)
		}
		delete(o.open, key)
	}
	return first
}
