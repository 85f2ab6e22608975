// Package vocab is what is left of a package that once held the refusals,
// the timekeeper's identity, the A2A extension URIs and the tenant and
// session names: each now has a package named for it (refuse,
// ledger.DefaultTimekeeper, a2atask, sessionname). Its names are aliases
// kept only so that code written against them compiles until it moves; new
// code imports the packages they name.
package vocab
