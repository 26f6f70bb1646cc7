package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// observingTransport reports every 401 and every list of the watched collections. It sits
// where Karmada's and client-go's own wrappers sit (rest.Config.WrapTransport), below the
// token source, so it sees the request as sent.
type observingTransport struct {
	inner  http.RoundTripper
	member string
	out    *emitter
}

func (t *observingTransport) RoundTrip(request *http.Request) (*http.Response, error) {
	if resource := listed(request); resource != "" {
		t.out.emit(observation{Member: t.member, Event: "list", Resource: resource})
	}
	response, err := t.inner.RoundTrip(request)
	if err == nil && response.StatusCode == http.StatusUnauthorized {
		t.out.emit(observation{Member: t.member, Event: "unauthorized", AtMs: time.Now().UnixMilli()})
	}
	return response, err
}

func (t *observingTransport) WrappedRoundTripper() http.RoundTripper { return t.inner }

// listed names the watched collection a request lists: a plain list, or a watch that streams
// the initial list (client-go's WatchListClient, on by default since 1.35). A watch that
// resumes from a resourceVersion is not a list.
func listed(request *http.Request) string {
	if request.Method != http.MethodGet {
		return ""
	}
	query := request.URL.Query()
	if query.Get("watch") == "true" && query.Get("sendInitialEvents") != "true" {
		return ""
	}
	for _, resource := range []string{"deployments", "nodes"} {
		if strings.HasSuffix(request.URL.Path, "/"+resource) {
			return resource
		}
	}
	return ""
}

// secretTokenSource reads the member's token from its Secret on the control plane, each read
// good for period: the source Karmada's member clients cache.
type secretTokenSource struct {
	member *member
	period time.Duration
}

func (s *secretTokenSource) Token() (*oauth2.Token, error) {
	token, err := s.member.readToken(context.Background())
	if err != nil {
		return nil, err
	}
	return &oauth2.Token{AccessToken: token, TokenType: "Bearer", Expiry: time.Now().Add(s.period)}, nil
}
