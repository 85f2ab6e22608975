package server

import (
	"net/http"

	"tally/api"
)

// readyRoutes list what a seat can take now (service.Work).
func (s *Server) readyRoutes() []route {
	return []route{
		{name: "work.ready", method: "GET", pattern: sessionPath + "/ready", summary: "What a seat (seat, default the authenticated identity) can take now: pool claims whose dependencies hold and promises it owes that wait on no antecedent, by priority then deadline, each with the command that takes it (now)", serve: s.ready},
	}
}

func (s *Server) ready(r *http.Request) (int, any, error) {
	c, err := s.readCall(r)
	if err != nil {
		return 0, nil, err
	}
	var q api.ReadyQuery
	if err := api.DecodeQuery(r.URL.Query(), &q); err != nil {
		return 0, nil, err
	}
	res, err := s.local.Ready(r.Context(), c, q.Seat)
	return http.StatusOK, res.JSON, err
}
