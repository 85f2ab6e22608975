package cluster

import (
	"context"

	"tally/service"
)

// Ready is what a seat can take now, read linearizably.
func (c *Node) Ready(ctx context.Context, call service.Call, seat string) (service.ReadyList, error) {
	return readOn(ctx, c, call, seat, service.Service.Ready)
}
