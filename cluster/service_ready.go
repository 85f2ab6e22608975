package cluster

import (
	"context"

	"tally/service"
)

// Ready is what a seat can take now, read linearizably.
func (c *Node) Ready(ctx context.Context, call service.Call, seat string) (service.ReadyList, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ReadyList, error) {
		return s.Ready(ctx, call, seat)
	})
}
