// Command bare serves the bench's bare net/http JSON handler
// (loadgen.BareHandler) on an address, for load generators other than
// `switchboard bench` (bench/wrk-send.sh runs wrk against it and a node).
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: loadgen.BareHandler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
