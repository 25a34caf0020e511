// Command warden-probe is the container image's health check: distroless has
// no shell, curl or wget, so compose (and a plain `docker run`) ask this
// small static binary instead. It GETs /readyz (or the path given as the
// first argument) on the port of WARDEN_LISTEN over loopback and exits 0
// only on 200.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	path := "/readyz"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	listen := os.Getenv("WARDEN_LISTEN")
	if listen == "" {
		listen = ":8080"
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-probe: WARDEN_LISTEN is not host:port")
		os.Exit(2)
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort("127.0.0.1", port) + path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-probe:", err)
		os.Exit(1)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "warden-probe:", path, resp.Status)
		os.Exit(1)
	}
}
