package service

// ArtifactCustody is the custody of one artifact's bytes on a cluster, as
// `tally claim show` reports it: at the group's placement epoch, the
// voters whose custody receipt for the content is at that epoch
// (Holders) and those whose is not (Missing). A single server reports
// none: its one copy is verified on every read.
type ArtifactCustody struct {
	Artifact string   `json:"artifact"`
	Content  string   `json:"content"`
	Group    uint64   `json:"group"`
	Epoch    uint64   `json:"epoch"`
	Holders  []uint64 `json:"holders"`
	Missing  []uint64 `json:"missing"`
}
