package mcp

import (
	"tally/api"
	"tally/service"
)

// readyTools list what a seat can take now (service.Work).
func readyTools() []tool {
	return []tool{
		read("tally_ready", "What can I take now",
			"What a seat (default: you) can take now: pool claims whose dependencies hold, and promises it owes that wait on nothing; by priority (0 highest), then deadline. Take a claim with tally_claim receipt.acquire.",
			plain(func(d *api.ReadyQuery) string { return d.Seat }), service.Service.Ready),
	}
}
