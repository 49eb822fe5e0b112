package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestRelayCopiesBothWays(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, "echo "+line)
			}()
		}
	}()

	listen := freeAddress(t)
	health := freeAddress(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, forwards{{listen, echo.Addr().String()}}, health) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	waitFor(t, func() error {
		resp, err := http.Get("http://" + health + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	})
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "echo hello\n" {
		t.Fatalf("relayed answer %q, want %q", got, "echo hello\n")
	}
}

func TestForwardFlagRefusesMalformedPairs(t *testing.T) {
	for _, v := range []string{"127.0.0.1:1", "127.0.0.1=10.0.0.1:2", "127.0.0.1:1=nowhere"} {
		var f forwards
		if err := f.Set(v); err == nil {
			t.Errorf("Set(%q) accepted a malformed pair", v)
		}
	}
	var f forwards
	if err := f.Set("127.0.0.1:1=10.0.0.1:2"); err != nil || f[0] != [2]string{"127.0.0.1:1", "10.0.0.1:2"} {
		t.Fatalf("Set of a good pair: %v, %v", f, err)
	}
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// waitFor retries f for at most 10 s.
func waitFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("not ready after 10s: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
