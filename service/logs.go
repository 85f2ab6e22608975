package service

// Logs is what works on a session's log as a whole: export, import and
// verify. (Declared with the promise family's change.)
type Logs interface{}
