package expect

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// ReplyTo says where the raising agent takes word of its expectation's
// lapses over A2A: "replyTo": {"url","extension"?,"push"?:{"url","token"?,
// "authentication"?:{"scheme","credentials"?}}}. URL is the agent's A2A
// JSON-RPC endpoint or its agent card's URL; Extension is the extension URI
// the expectation was raised under (the lapse comes back under it); push is
// an A2A push-notification config: its URL, its token (sent as
// A2A-Notification-Token) and its authentication (sent as "Authorization:
// scheme credentials", e.g. Bearer or Basic). At least one of URL and
// PushURL is set. Token and credentials are stored in the ledger as given
// (views show "set"): use ones meant for this.
type ReplyTo struct {
	URL       string
	Extension string
	PushURL   string
	PushToken string
	// PushAuthScheme and PushAuthCredentials are the push config's
	// authentication (A2A AuthenticationInfo).
	PushAuthScheme      string
	PushAuthCredentials string
}

// replyToJSON is a ReplyTo's shape in views and notices: the record's.
type replyToJSON struct {
	URL       string    `json:"url,omitempty"`
	Extension string    `json:"extension,omitempty"`
	Push      *pushJSON `json:"push,omitempty"`
}

type pushJSON struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	Auth  *struct {
		Scheme      string `json:"scheme"`
		Credentials string `json:"credentials,omitempty"`
	} `json:"authentication,omitempty"`
}

// MarshalJSON writes the record's shape (see ReplyTo).
func (rt ReplyTo) MarshalJSON() ([]byte, error) {
	j := replyToJSON{URL: rt.URL, Extension: rt.Extension}
	if rt.hasPush() {
		j.Push = &pushJSON{URL: rt.PushURL, Token: rt.PushToken}
		if rt.PushAuthScheme != "" || rt.PushAuthCredentials != "" {
			j.Push.Auth = &struct {
				Scheme      string `json:"scheme"`
				Credentials string `json:"credentials,omitempty"`
			}{rt.PushAuthScheme, rt.PushAuthCredentials}
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (rt *ReplyTo) UnmarshalJSON(b []byte) error {
	var j replyToJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*rt = ReplyTo{URL: j.URL, Extension: j.Extension}
	if j.Push != nil {
		rt.PushURL, rt.PushToken = j.Push.URL, j.Push.Token
		if j.Push.Auth != nil {
			rt.PushAuthScheme, rt.PushAuthCredentials = j.Push.Auth.Scheme, j.Push.Auth.Credentials
		}
	}
	return nil
}

func (rt *ReplyTo) hasPush() bool {
	return rt.PushURL != "" || rt.PushToken != "" || rt.PushAuthScheme != "" || rt.PushAuthCredentials != ""
}

// ReplyToMax bounds each member of a ReplyTo, in bytes.
const ReplyToMax = 2048

// isAuthScheme reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// form of an authentication scheme's name.
func isAuthScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

// problem names the first member of a ReplyTo that cannot be used: URLs are
// absolute http or https URLs with a host, every member is bounded and has
// no control characters, and a push token needs a push URL.
func (rt *ReplyTo) problem() (field, msg string) {
	if rt.URL == "" && rt.PushURL == "" {
		return "replyTo.url", "missing: give the agent's A2A URL or a push URL"
	}
	for _, f := range []struct{ name, value string }{
		{"replyTo.url", rt.URL}, {"replyTo.extension", rt.Extension},
		{"replyTo.push.url", rt.PushURL}, {"replyTo.push.token", rt.PushToken},
		{"replyTo.push.authentication.scheme", rt.PushAuthScheme},
		{"replyTo.push.authentication.credentials", rt.PushAuthCredentials},
	} {
		if len(f.value) > ReplyToMax {
			return f.name, fmt.Sprintf("longer than %d bytes", ReplyToMax)
		}
		for _, c := range f.value {
			if c < 0x20 || c == 0x7f {
				return f.name, "must not hold control characters"
			}
		}
	}
	for _, f := range []struct{ name, value string }{{"replyTo.url", rt.URL}, {"replyTo.push.url", rt.PushURL}} {
		if f.value == "" {
			continue
		}
		u, err := url.Parse(f.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return f.name, "must be an absolute http or https URL"
		}
	}
	if rt.PushToken != "" && rt.PushURL == "" {
		return "replyTo.push.url", "required with replyTo.push.token"
	}
	if rt.PushAuthScheme != "" || rt.PushAuthCredentials != "" {
		if rt.PushURL == "" {
			return "replyTo.push.url", "required with replyTo.push.authentication"
		}
		if !isAuthScheme(rt.PushAuthScheme) {
			return "replyTo.push.authentication.scheme", "must be an HTTP authentication scheme name such as Bearer or Basic (letters, digits and !#$%&'*+-.^_`|~)"
		}
		if strings.TrimSpace(rt.PushAuthCredentials) != rt.PushAuthCredentials {
			return "replyTo.push.authentication.credentials", "must not start or end with white space"
		}
	}
	return "", ""
}
