package helm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// registryDialTimeout bounds a TCP connect to a registry.
const registryDialTimeout = 10 * time.Second

// refusedAddressError is the error of a registry on an address the
// deployer refuses.
type refusedAddressError struct{ msg string }

func (e *refusedAddressError) Error() string { return e.msg }

// chartTooLargeError is the error of a registry response over the cap.
type chartTooLargeError struct{ limit int64 }

func (e *chartTooLargeError) Error() string {
	return fmt.Sprintf("the registry's response is larger than %s (--max-chart-bytes)", resource.NewQuantity(e.limit, resource.BinarySI))
}

// registryHTTPClient returns the client for one registry host: every
// request times out, every response is capped, every dial is checked
// (a name that resolves to a loopback address later is refused then too).
// plainHTTP is true for an allowed loopback registry.
func (cs *chartSource) registryHTTPClient(host string) (hc *http.Client, plainHTTP bool, err error) {
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	loopback := hostname == "localhost" || isLoopbackIP(net.ParseIP(hostname))
	if loopback && !cs.opts.AllowLoopback {
		return nil, false, &refusedAddressError{msg: fmt.Sprintf("registry %s is a loopback address of the deployer's own host: refused unless the deployer runs with --allow-loopback-registries", host)}
	}
	dialer := &net.Dialer{Timeout: registryDialTimeout}
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: registryDialTimeout,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := net.DefaultResolver.LookupIPAddr(ctx, h)
			if err != nil {
				return nil, err
			}
			for _, ip := range ips {
				if isLoopbackIP(ip.IP) && !cs.opts.AllowLoopback {
					return nil, &refusedAddressError{msg: fmt.Sprintf("registry %s resolves to %s, a loopback address: refused unless the deployer runs with --allow-loopback-registries", addr, ip.IP)}
				}
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(ips[0].IP.String(), port))
		},
	}
	limit := cs.opts.MaxChartBytes
	return &http.Client{
		Timeout:   cs.opts.RequestTimeout,
		Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) { return cappedRoundTrip(transport, req, limit) }),
	}, loopback, nil
}

func isLoopbackIP(ip net.IP) bool { return ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) }

// anonymous is an OCI authorizer without credentials (pull secrets are
// not read yet); it handles the registries' anonymous token flow.
func anonymous(hc *http.Client) *auth.Client {
	return &auth.Client{Client: hc, Cache: auth.NewCache()}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func cappedRoundTrip(next http.RoundTripper, req *http.Request, limit int64) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, &chartTooLargeError{limit: limit}
	}
	resp.Body = &cappedBody{body: resp.Body, left: limit, limit: limit}
	return resp, nil
}

// cappedBody fails a read past the cap, so memory stays within it.
type cappedBody struct {
	body  io.ReadCloser
	left  int64
	limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &chartTooLargeError{limit: b.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, &chartTooLargeError{limit: b.limit}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
