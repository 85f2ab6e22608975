package a2atask

import (
	"strings"
	"testing"
)

// The card's extensions say, per family, the key a record rides under,
// its aliases and actions, and where the session's events and artifacts
// are; the server's own card says where the other sessions' agents are.
func TestAgentCardWire(t *testing.T) {
	c := Card{URIs: URIs{Claim: "urn:acme:claim"}, Base: "https://t.example", Tenant: "acme", Session: "main", LapseDelivery: true}
	card := c.AgentCard()
	const sess = "https://t.example/v1/tenants/acme/sessions/main"
	want := []string{
		`{"params":{"actions":["declare","amend","resolve","assess"],"aliases":["` + PinkiPromiseURI + `"],` +
			`"assessmentsAt":"` + sess + `/events","events":"` + sess + `/events","family":"promise","keepsTime":true,"metadataKey":"urn:tally:ext:promise"},"uri":"urn:tally:ext:promise"}`,
		`{"params":{"actions":["create","post","cancel","revoke","supersede","receipt.acquire","receipt.adopt","progress","testament.close","testament.post",` +
			`"testament.receive","deadline.commit","dependency.commit","check.begin","check.report","artifact.publish","artifact.receive"],` +
			`"artifactURLs":"` + sess + `/claims/{claim}/artifacts/{artifact}","events":"` + sess + `/events","family":"claim","keepsTime":true,"metadataKey":"urn:acme:claim"},"uri":"urn:acme:claim"}`,
		`{"params":{"actions":["raise","fact","withdraw","outcome"],"aliases":["` + ExpectationsDraftURI + `"],` +
			`"events":"` + sess + `/events","family":"expect","keepsTime":true,"lapseDelivery":true,"metadataKey":"urn:tally:ext:expect"},"uri":"urn:tally:ext:expect"}`,
	}
	exts := card.Capabilities.Extensions
	if len(exts) != len(want) {
		t.Fatalf("%d extensions", len(exts))
	}
	for i, e := range exts {
		e.Description = ""
		if got := wire(t, e); got != want[i] {
			t.Errorf("extension %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	if got := wire(t, card.SupportedInterfaces); got != `[{"url":"`+sess+`/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"`+sess+`/a2a/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]` {
		t.Errorf("interfaces %s", got)
	}
	if strings.Contains(card.Description, "This card is the agent of session") {
		t.Errorf("a session's card speaks for the server: %s", card.Description)
	}
	c.Root, c.LapseDelivery = true, false
	card = c.AgentCard()
	if !strings.Contains(card.Description, " This card is the agent of session acme/main. Every tally session is an agent of its own: https://t.example/v1/tenants/{tenant}/sessions/{session}/a2a") ||
		card.Capabilities.Extensions[2].Params["lapseDelivery"] != false {
		t.Errorf("the server's card: %s %v", card.Description, card.Capabilities.Extensions[2].Params)
	}
}
