package replica

// An aborted move's content records in its destination: the install
// recorded the content the moved session's records name, held by the
// source's voters, so that every destination node fetched and receipted a
// copy; the drop after an abort removes those records, and the receipts
// made for them, unless a write of the group's own named the content
// since. Nothing of the group's then names the bytes, and the nodes'
// collection (cluster's CollectArtifacts, decided by the logs and the
// content records as applied) removes the copies the destination's nodes
// fetched, once past its grace; a node that holds the source's session
// keeps them, its records naming them.

import "strings"

// unwindContents removes, in the batch, the content records move's
// install made in the batch's group, and their receipts.
func (m *dataSM) unwindContents(move uint64) error {
	b := m.batch
	if b == nil {
		return nil
	}
	var gone []string
	err := m.eachContent(b.group, func(content string, r contentRecord) error {
		if _, mine := b.contents[content]; !mine && r.MovedIn == move {
			gone = append(gone, content)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for content, r := range b.contents {
		if r.MovedIn == move && !r.gone {
			gone = append(gone, content)
		}
	}
	for _, content := range gone {
		b.contents[content] = contentRecord{gone: true}
		err := m.eachReceipt(b.group, content+"/", func(name string, _ receiptRecord) error {
			b.receipts[name] = receiptRecord{gone: true}
			return nil
		})
		if err != nil {
			return err
		}
		for name := range b.receipts {
			if strings.HasPrefix(name, content+"/") {
				b.receipts[name] = receiptRecord{gone: true}
			}
		}
	}
	return nil
}
