package cluster

import "slices"

// Forward is where a request about tenant/session goes when this node does
// not hold the session's group (placed on other members): the HTTP address
// of the member that last recorded the group's configuration, its leader
// then, else one of its voters. ok is false when this node holds the group
// (a voter or a learner), when no factor is recorded (every member holds
// every group), or when the group's configuration is not known yet: the
// node then serves the request itself.
func (c *Node) Forward(tenant, session string) (addr string, ok bool) {
	pol := c.sm.Policy()
	if pol.Replicas == 0 {
		return "", false
	}
	conf, known := pol.Groups[c.sm.GroupOf(tenant, session)]
	if !known || len(conf.Voters) == 0 || slices.Contains(conf.Voters, c.cfg.NodeID) || slices.Contains(conf.Learners, c.cfg.NodeID) {
		return "", false
	}
	to := conf.Leader
	if !slices.Contains(conf.Voters, to) {
		to = conf.Voters[0]
	}
	m, found := c.sm.Member(to)
	if !found || m.Addr == "" || to == c.cfg.NodeID {
		return "", false
	}
	return m.Addr, true
}
