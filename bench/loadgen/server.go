package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// bareItem and bareResponse shape the baseline's JSON answer like a typical
// list endpoint of the API.
type bareItem struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type bareResponse struct {
	Data []bareItem `json:"data"`
}

// BareHandler returns the baseline handler: a minimal but honest JSON
// endpoint built from net/http and encoding/json only. For every request it
// reads and discards the request body, then encodes a freshly built small
// struct as {"data":[{"id":"01J...","name":"bare"}]} with Content-Type
// application/json and status 200.
func BareHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "reading request body failed", http.StatusBadRequest)
			return
		}
		resp := bareResponse{Data: []bareItem{{ID: "01J9ZQ4T7W3K5M8N2P6R0S1V4X", Name: "bare"}}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// Serve starts an http.Server for h on a free port of 127.0.0.1 and returns
// its base URL (such as "http://127.0.0.1:41234", without a trailing slash)
// and a function that shuts the server down, waiting up to 5 seconds for
// active requests, and returns once it has stopped. stop may be called more
// than once.
func Serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("loadgen: serve: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if srv.Shutdown(ctx) != nil {
				_ = srv.Close()
			}
			<-served
		})
	}
	return "http://" + ln.Addr().String(), stop, nil
}
