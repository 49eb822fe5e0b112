package helm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// registryDialTimeout bounds a TCP connect to a chart server.
const registryDialTimeout = 10 * time.Second

// refusedAddressError is the error of a chart server on an address the
// deployer refuses.
type refusedAddressError struct{ msg string }

func (e *refusedAddressError) Error() string { return e.msg }

// tooLargeError is the error of a response over its cap, named by the
// flag that sets it.
type tooLargeError struct {
	limit int64
	flag  string
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the server's response is larger than %s (--%s)", resource.NewQuantity(e.limit, resource.BinarySI), e.flag)
}

// serverClient says how to reach one chart server.
type serverClient struct {
	// kind names the server in errors: "registry", "chart server".
	kind string
	// host is host or host:port.
	host string
	// rootCAs replaces the system roots when set (a chart repository's customCAData).
	rootCAs *x509.CertPool
	// limit caps each response body; limitFlag is the flag that sets it.
	limit     int64
	limitFlag string
}

// registryHTTPClient returns the client for one registry host, capped at
// --max-chart-bytes. plainHTTP is true for an allowed loopback registry.
func (cs *chartSource) registryHTTPClient(host string) (hc *http.Client, plainHTTP bool, err error) {
	return cs.guardedClient(serverClient{kind: "registry", host: host, limit: cs.opts.MaxChartBytes, limitFlag: "max-chart-bytes"})
}

// guardedClient returns the client for one chart server: every request
// times out, every response is capped, every dial is checked (a name that
// resolves to a loopback address later is refused then too). loopback is
// true for an allowed loopback server.
func (cs *chartSource) guardedClient(sc serverClient) (hc *http.Client, loopback bool, err error) {
	hostname := sc.host
	if h, _, err := net.SplitHostPort(sc.host); err == nil {
		hostname = h
	}
	loopback = hostname == "localhost" || isLoopbackIP(net.ParseIP(hostname))
	if loopback && !cs.opts.AllowLoopback {
		return nil, false, &refusedAddressError{msg: fmt.Sprintf("%s %s is a loopback address of the deployer's own host: refused unless the deployer runs with --allow-loopback-registries", sc.kind, sc.host)}
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
					return nil, &refusedAddressError{msg: fmt.Sprintf("%s %s resolves to %s, a loopback address: refused unless the deployer runs with --allow-loopback-registries", sc.kind, addr, ip.IP)}
				}
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(ips[0].IP.String(), port))
		},
	}
	if sc.rootCAs != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: sc.rootCAs, MinVersion: tls.VersionTLS12}
	}
	limit, flag := sc.limit, sc.limitFlag
	return &http.Client{
		Timeout:   cs.opts.RequestTimeout,
		Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) { return cappedRoundTrip(transport, req, limit, flag) }),
	}, loopback, nil
}

func isLoopbackIP(ip net.IP) bool { return ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) }

// registryAuthorizer is an OCI authorizer with the item's credential for
// the registry, or none (cred nil); it handles the registries' token flow.
func registryAuthorizer(hc *http.Client, host string, cred *auth.Credential) *auth.Client {
	c := &auth.Client{Client: hc, Cache: auth.NewCache()}
	if cred != nil {
		c.Credential = auth.StaticCredential(host, *cred)
	}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func cappedRoundTrip(next http.RoundTripper, req *http.Request, limit int64, flag string) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, &tooLargeError{limit: limit, flag: flag}
	}
	resp.Body = &cappedBody{body: resp.Body, left: limit, limit: limit, flag: flag}
	return resp, nil
}

// cappedBody fails a read past the cap, so memory stays within it.
type cappedBody struct {
	body  io.ReadCloser
	left  int64
	limit int64
	flag  string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &tooLargeError{limit: b.limit, flag: b.flag}
	}
	// One byte more than allowed tells a body of exactly the limit from a
	// larger one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, &tooLargeError{limit: b.limit, flag: b.flag}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
