// Command webserver is the smallest HTTP service the local node runs to show
// that pods, Services and cluster DNS work: GET / answers with the pod's host
// name, GET /healthz with "ok" (for a readiness probe), and with -get URL it
// is a client instead, printing what URL answers (for a check from inside
// another pod, where the image has no shell or curl).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve HTTP on")
	get := flag.String("get", "", "instead of serving, GET this URL, print the body and exit non-zero unless it answers 200")
	retryFor := flag.Duration("retry-for", 0, "with -get: retry failed requests for this long (a Service is reachable a moment after its pods are ready)")
	flag.Parse()
	if *get != "" {
		if err := fetchWithRetry(*get, *retryFor, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := serve(*listen); err != nil {
		log.Fatal(err)
	}
}

func serve(addr string) error {
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintf(w, "hello from %s\n", host) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("serving on %s", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fetchWithRetry retries fetch once a second until it succeeds or retryFor
// has passed, and returns the last error.
func fetchWithRetry(url string, retryFor time.Duration, out io.Writer) error {
	deadline := time.Now().Add(retryFor)
	for {
		err := fetch(url, out)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		log.Printf("%v; retrying", err)
		time.Sleep(time.Second)
	}
}

func fetch(url string, out io.Writer) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(out, io.LimitReader(resp.Body, 1<<20)); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
