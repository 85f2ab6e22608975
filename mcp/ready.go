package mcp

import (
	"tally/api"
	"tally/service"
)

// readyTools list what a seat can take now (service.Work).
func readyTools() []tool {
	return []tool{
		single(read("tally_ready", "What can I take now",
			"Work a seat can take now, by priority then deadline (tally ready).",
			plain(func(d *api.ReadyQuery) string { return d.Seat }), service.Service.Ready)),
	}
}
