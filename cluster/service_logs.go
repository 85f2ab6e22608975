package cluster

import (
	"context"
	"errors"
	"io"

	"tally/service"
	"tally/verb"
)

var _ service.Logs = (*Node)(nil)

// logsOf is the replica Service's log verbs.
func logsOf(s service.Service) (service.Logs, error) {
	l, ok := s.(service.Logs)
	if !ok {
		return nil, errors.New("cluster: the replica's Service has no log verbs")
	}
	return l, nil
}

// Import appends lines to the session on every replica, all or none.
func (c *Node) Import(ctx context.Context, call service.Call, lines []byte) (service.Imported, error) {
	return write[verb.ImportDoc, service.Imported](ctx, c, service.MethodImport, call, verb.ImportDoc{Lines: lines})
}

// Export writes this replica's copy of the session, read-consistent.
func (c *Node) Export(ctx context.Context, call service.Call, format string, w io.Writer, warn func(string)) (service.Exported, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.Exported, error) {
		l, err := logsOf(s)
		if err != nil {
			return service.Exported{}, err
		}
		return l.Export(ctx, call, format, w, warn)
	})
}

// Verify checks this replica's log of the session, read-consistent.
func (c *Node) Verify(ctx context.Context, call service.Call) (service.Verified, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.Verified, error) {
		l, err := logsOf(s)
		if err != nil {
			return service.Verified{}, err
		}
		return l.Verify(ctx, call)
	})
}

// VerifyAll checks this replica's log of every session of call.Tenant,
// once every data group is read-consistent here.
func (c *Node) VerifyAll(ctx context.Context, call service.Call) (service.Verified, error) {
	if err := c.readAll(ctx); err != nil {
		return service.Verified{}, err
	}
	l, err := logsOf(c.sm.Service())
	if err != nil {
		return service.Verified{}, err
	}
	return l.VerifyAll(ctx, call)
}
