package api

// The REST binding's own headers, which the server sets and the client reads.
const (
	// ExportErrorTrailer carries the error document of an export that
	// failed after its first bytes were sent, when the status can no
	// longer say so.
	ExportErrorTrailer = "Tally-Error"
	// LogHeader names the verified log, relative to the server's ledger
	// directory, in a verify answer.
	LogHeader = "Tally-Log"
	// WarningHeader carries, on an export, the warning a local read prints
	// on opening the ledger: the records it keeps but does not fold.
	WarningHeader = "Tally-Warning"
	// ReplayedHeader marks an answer replayed from a request id's record.
	ReplayedHeader = "Idempotent-Replayed"
	// ReplicatedHeader ("true") marks every answer of a cluster node: a
	// write there may end with its outcome unknown (503 UnknownOutcome),
	// so a client gives each write a request id.
	ReplicatedHeader = "Tally-Replicated"
)
