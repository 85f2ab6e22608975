package client

import (
	"context"

	"tally/api"
	"tally/service"
	"tally/verb"
)

func (c *Client) Ready(ctx context.Context, call service.Call, seat string) (service.ReadyList, error) {
	q := api.ReadyQuery{Seat: seat}
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), verb.WorkReady)
	return answer(service.ReadReadyList, doc, err)
}
