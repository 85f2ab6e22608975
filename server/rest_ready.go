package server

import (
	"net/http"

	"tally/api"
)

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
