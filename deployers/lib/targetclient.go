package lib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/terrace-dev/terrace/kit/bytesize"
)

// Defaults of TargetClientOptions.
const (
	DefaultMaxTargetResponseBytes = 16 << 20
	DefaultTargetRequestTimeout   = 30 * time.Second
	// targetDialTimeout bounds a TCP connect to a target (the request
	// timeout bounds the whole request on top).
	targetDialTimeout = 10 * time.Second
)

// Reasons of the errors a guarded target client returns.
const (
	// ReasonTargetResponseTooLarge: a response of the target API server was
	// larger (decompressed) than --target-max-response-bytes.
	ReasonTargetResponseTooLarge = "TargetResponseTooLarge"
	// ReasonTargetAddressRefused: the Target's server resolves to an address
	// the deployer refuses (loopback, its own listen addresses).
	ReasonTargetAddressRefused = "TargetAddressRefused"
)

// TargetClientOptions bound every connection a deployer makes to a target
// cluster. A Target is written by a tenant; its cluster is not trusted to
// answer small, fast or at all, nor to be somewhere else than the deployer.
type TargetClientOptions struct {
	// MaxResponseBytes caps each response body after decompression
	// (--target-max-response-bytes); a larger one fails the request.
	MaxResponseBytes int64
	// RequestTimeout bounds each request, body included
	// (--target-request-timeout).
	RequestTimeout time.Duration
	// AllowLoopback lets Targets name loopback addresses
	// (--allow-loopback-targets): local environments and tests, whose API
	// server listens on 127.0.0.1.
	AllowLoopback bool
	// OwnListenAddresses are the deployer's own listen addresses (metrics,
	// health probes, pprof): never a target, whatever AllowLoopback says.
	OwnListenAddresses []string
	// DenySelfTargets refuses self targets (--deny-self-targets): a self
	// target acts as any ServiceAccount of its namespace, so whoever may
	// create Targets there gets that ServiceAccount's rights.
	DenySelfTargets bool
}

// BindFlags registers the options as flags on fs; fields already set are
// the defaults.
func (o *TargetClientOptions) BindFlags(fs *pflag.FlagSet) {
	o.setDefaults()
	fs.Var(bytesize.Flag(&o.MaxResponseBytes), "target-max-response-bytes",
		"The largest response body (after decompression) the deployer reads from a target cluster, e.g. 16Mi; a larger one fails the request.")
	fs.DurationVar(&o.RequestTimeout, "target-request-timeout", o.RequestTimeout,
		"How long one request to a target cluster may take, reading the response included.")
	fs.BoolVar(&o.AllowLoopback, "allow-loopback-targets", o.AllowLoopback,
		"Let Targets name loopback addresses (127.0.0.0/8, ::1, localhost): for local environments and tests whose API server listens there. The deployer's own listen ports stay refused.")
	fs.BoolVar(&o.DenySelfTargets, "deny-self-targets", o.DenySelfTargets,
		"Refuse self targets (spec.config.selfConfig): without this flag a Target acts, on the deployer's own cluster, as any ServiceAccount of its namespace it names.")
}

func (o *TargetClientOptions) setDefaults() {
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxTargetResponseBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultTargetRequestTimeout
	}
}

// Guard makes cfg, a client configuration built from a Target's
// kubeconfig, keep the bounds: each request times out, each response body
// is capped after decompression, and every connection (each dial, so a
// name that resolves elsewhere later is checked again) goes only to an
// address the options allow. It resolves cfg's host now and returns an
// *AddressRefusedError when it is refused (other errors: the name did not
// resolve).
func (o TargetClientOptions) Guard(ctx context.Context, cfg *rest.Config) error {
	o.setDefaults()
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		// rest.Config accepts a bare host:port; so does the check.
		u = &url.URL{Scheme: "https", Host: cfg.Host}
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	if _, err := o.checkedAddrs(ctx, net.JoinHostPort(u.Hostname(), port)); err != nil {
		return err
	}
	o.Bound(cfg)
	dialer := &net.Dialer{Timeout: min(targetDialTimeout, o.RequestTimeout)}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		addrs, err := o.checkedAddrs(ctx, addr)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, a := range addrs {
			c, err := dialer.DialContext(ctx, network, a)
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	return nil
}

// Bound makes cfg keep the time and size bounds (each request times out,
// each response body is capped after decompression) without checking its
// address: for a connection the deployer itself configured, such as a self
// target's to its own cluster.
func (o TargetClientOptions) Bound(cfg *rest.Config) {
	o.setDefaults()
	cfg.Timeout = o.RequestTimeout
	limit := o.MaxResponseBytes
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &cappedTransport{next: rt, limit: limit}
	})
}

// checkedAddrs resolves addr (host:port) and returns the addresses to dial,
// or an AddressRefusedError if any of them is refused: a name that resolves
// to both a refused and an allowed address is refused as a whole.
func (o TargetClientOptions) checkedAddrs(ctx context.Context, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("target server %q: %w", addr, err)
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("target server %s: %w", addr, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if why := o.refused(ip.IP, port); why != "" {
			return nil, &AddressRefusedError{Message: fmt.Sprintf("target server %s resolves to %s, %s", addr, ip.IP, why)}
		}
		out = append(out, net.JoinHostPort(ip.IP.String(), port))
	}
	return out, nil
}

// refused says why ip:port must not be a target ("" when it may).
func (o TargetClientOptions) refused(ip net.IP, port string) string {
	local := ip.IsLoopback() || ip.IsUnspecified() || isOwnInterfaceAddress(ip)
	for _, own := range o.OwnListenAddresses {
		h, p, err := net.SplitHostPort(own)
		if err != nil || p != port || p == "0" {
			continue
		}
		hip := net.ParseIP(h)
		everywhere := h == "" || (hip != nil && hip.IsUnspecified())
		if (everywhere && local) || (hip != nil && hip.Equal(ip)) || (h == "localhost" && ip.IsLoopback()) {
			return "the deployer's own listen address " + own + " (metrics, health probes or pprof): a target is never the deployer itself"
		}
	}
	if (ip.IsLoopback() || ip.IsUnspecified()) && !o.AllowLoopback {
		return "a loopback address of the deployer's own host: the deployer refuses loopback targets unless started with --allow-loopback-targets"
	}
	return ""
}

// isOwnInterfaceAddress reports whether ip is an address of one of the
// host's network interfaces: a listener on ":port" answers there too.
func isOwnInterfaceAddress(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(addrs, func(a net.Addr) bool {
		n, ok := a.(*net.IPNet)
		return ok && n.IP.Equal(ip)
	})
}

// AddressRefusedError is the error of a Target whose server resolves to an
// address the deployer refuses.
type AddressRefusedError struct{ Message string }

func (e *AddressRefusedError) Error() string { return e.Message }

// ResponseTooLargeError is the error of a response body larger than the
// cap. It is read no further, so memory stays within the cap.
type ResponseTooLargeError struct {
	Limit int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the target API server's response is larger than %s (--target-max-response-bytes); it was not read further",
		resource.NewQuantity(e.Limit, resource.BinarySI))
}

// cappedTransport caps response bodies. It wraps the transport that
// decompresses, so the cap counts decompressed bytes: a small compressed
// body that inflates to gigabytes stops at the cap.
type cappedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > t.limit {
		_ = resp.Body.Close()
		return nil, &ResponseTooLargeError{Limit: t.limit}
	}
	resp.Body = &cappedBody{body: resp.Body, limit: t.limit, left: t.limit}
	return resp, nil
}

// cappedBody returns a ResponseTooLargeError once more than limit bytes
// were read, and reads nothing further.
type cappedBody struct {
	body        io.ReadCloser
	limit, left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &ResponseTooLargeError{Limit: b.limit}
	}
	// One byte more than allowed tells a body of exactly the limit from a
	// larger one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, &ResponseTooLargeError{Limit: b.limit}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
