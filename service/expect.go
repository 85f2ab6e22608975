package service

// Expectations is the expectation family: raise, fact, supersede,
// withdraw, task outcomes, lapses and their reads. (Declared by the
// expectation family's change.)
type Expectations interface{}
