// Command relay copies TCP connections from one address to another, both
// ways, untouched (TLS passes through). The local environment's services
// listen on loopback; relay makes them reachable where they are not. On the
// node it relays the node's IP to loopback, so that pods reach kube-apiserver
// and the registry at the node's IP. In a pod of the local deployment it
// relays the pod's loopback to the node's IP, so that a controller in a pod
// finds the registry and the API server at the same 127.0.0.1 addresses as
// the controller processes do.
//
//	relay -forward 127.0.0.1:22381=10.244.0.1:22381 -forward ...
//
// It answers GET /healthz on -health-address once every listener is open.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// forwards are the -forward LISTEN=TARGET pairs, in the order given.
type forwards [][2]string

func (f *forwards) String() string { return fmt.Sprint(*f) }

func (f *forwards) Set(v string) error {
	listen, target, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want LISTEN=TARGET (host:port=host:port), got %q", v)
	}
	for _, a := range []string{listen, target} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
	}
	*f = append(*f, [2]string{listen, target})
	return nil
}

func main() {
	var fw forwards
	flag.Var(&fw, "forward", "LISTEN=TARGET: accept on LISTEN, relay each connection to TARGET (repeatable)")
	health := flag.String("health-address", "", "serve GET /healthz here (empty: no health endpoint)")
	flag.Parse()
	if len(fw) == 0 {
		log.Fatal("no -forward given")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, fw, *health); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, fw forwards, health string) error {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var lc net.ListenConfig
	for _, f := range fw {
		l, err := lc.Listen(ctx, "tcp", f[0])
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		log.Printf("relaying %s to %s", f[0], f[1])
	}
	if health != "" {
		hl, err := lc.Listen(ctx, "tcp", health)
		if err != nil {
			return err
		}
		listeners = append(listeners, hl)
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(hl) }()
	}
	var wg sync.WaitGroup
	for i, f := range fw {
		wg.Add(1)
		go func() { defer wg.Done(); accept(ctx, listeners[i], f[1]) }()
	}
	<-ctx.Done()
	for _, l := range listeners {
		_ = l.Close()
	}
	wg.Wait()
	return nil
}

// accept relays every connection of l to target until l is closed.
func accept(ctx context.Context, l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Printf("accepting on %s: %v", l.Addr(), err)
			}
			return
		}
		go relay(ctx, c, target)
	}
}

// relay copies both ways between c and a new connection to target; when one
// side ends its writes, the other side's writes end too.
func relay(ctx context.Context, c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	d := net.Dialer{Timeout: 10 * time.Second}
	t, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		log.Printf("relaying %s: %v", c.RemoteAddr(), err)
		return
	}
	defer func() { _ = t.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
	<-done
}
