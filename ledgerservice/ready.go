package ledgerservice

import (
	"cmp"
	"context"

	"tally/ledger"
	"tally/promise"
	"tally/refuse"
	"tally/service"
)

// Ready lists seat's takeable claims and open promises, most pressing first.
func (s *Local) Ready(ctx context.Context, c service.Call, seat string) (service.ReadyList, error) {
	seat = cmp.Or(seat, c.Actor)
	if seat == "" {
		return service.ReadyList{}, refuse.Invalidf("seat", "required: the seat whose ready work to list")
	}
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ReadyList{}, err
	}
	now := s.at(c)
	var items []service.ReadyItem
	l.Read(func(st *ledger.State) {
		owed := st.Promises.Select(promise.Filter{State: "open", By: seat}, now)
		items = service.ReadyItems(c.Tenant, c.Session, seat, st.Claims.Takeable(seat), owed, now)
	})
	doc, err := service.ReadyDoc(now, seat, items)
	if err != nil {
		return service.ReadyList{}, err
	}
	return service.ReadyList{Doc: service.Doc{JSON: doc}, Now: now, Seat: seat, Items: items}, nil
}
