package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/proto/gloadpb"
)

// Sentinel errors.
var (
	// ErrAddress means the address given to Dial is malformed.
	ErrAddress = errors.New("client: bad address")
	// ErrProtocol means the server sent something the protocol does not allow.
	ErrProtocol = errors.New("client: protocol error")
	// ErrClosed means the stream was closed by the caller.
	ErrClosed = errors.New("client: stream closed")
)

// DefaultMaxMessageBytes bounds one received message (a batch).
const DefaultMaxMessageBytes = 1 << 30

type options struct {
	tls      *tls.Config
	maxMsg   int
	dialOpts []grpc.DialOption
	token    *string
	trust    *access.Trust
}

// Option configures Dial.
type Option func(*options)

// WithTLS connects with TLS (default: plaintext, for unix sockets and loopback).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithAuthToken sends tok as the bearer token of every call (servers started
// with --auth-token-file want it). Without this option Dial sends
// $GLOAD_AUTH_TOKEN (or the content of $GLOAD_AUTH_TOKEN_FILE) when set; an
// empty tok sends none.
func WithAuthToken(tok string) Option { return func(o *options) { o.token = &tok } }

// AuthDialOption is the dial option that sends tok as the bearer token of
// every call ("" : none), for callers that make their own gRPC connection.
func AuthDialOption(tok string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearer(tok))
}

// bearer is a token sent as per-call metadata, over plaintext too: gload
// serves unix sockets and loopback without TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{access.MetadataKey: access.Header(string(b))}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// WithTrust names the users (besides the caller and root) whose servers Dial
// accepts; without it Dial reads $GLOAD_TRUST_SERVER (access.TrustFromEnv).
// Dial checks, before it sends anything, that a unix socket lies in a
// directory only trusted users can change, belongs to a trusted user and is
// served by one (SO_PEERCRED), and that a loopback TCP server is run by a
// trusted user; a ring the server names must belong to the server's user.
func WithTrust(t access.Trust) Option { return func(o *options) { o.trust = &t } }

// WithMaxMessageBytes bounds one received message (default 1 GiB).
func WithMaxMessageBytes(n int) Option { return func(o *options) { o.maxMsg = n } }

// WithDialOptions adds gRPC dial options.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// Client is a connection to a gload server. It is safe for concurrent use;
// each Stream is one consumer.
type Client struct {
	cc     *grpc.ClientConn
	api    gloadpb.LoaderClient
	addr   string
	maxMsg int
	dialer *access.Dialer
}

// target turns a gload address into a gRPC target.
func target(addr string) (string, error) {
	if strings.HasPrefix(addr, "unix:") {
		if strings.HasPrefix(addr, "unix://") && !strings.HasPrefix(addr, "unix:///") {
			return "", fmt.Errorf("%w: %q: unix:// needs an absolute path (unix:///path.sock)", ErrAddress, addr)
		}
		return addr, nil
	}
	if addr == "" || strings.Contains(addr, "://") || !strings.Contains(addr, ":") {
		return "", fmt.Errorf("%w: %q: want unix:///path.sock or host:port", ErrAddress, addr)
	}
	return "passthrough:///" + addr, nil
}

// Dial connects to the server at addr (unix:///path.sock or host:port) and
// waits until the connection is ready, it fails, or ctx ends.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{maxMsg: DefaultMaxMessageBytes}
	for _, f := range opts {
		f(&o)
	}
	tgt, err := target(addr)
	if err != nil {
		return nil, err
	}
	tok := ""
	if o.token != nil {
		tok = *o.token
	} else if tok, err = access.EnvTokenValue(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	trust := access.Trust{}
	if o.trust != nil {
		trust = *o.trust
	} else if trust, err = access.TrustFromEnv(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	dialer := access.NewDialer(trust)
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.maxMsg)),
		grpc.WithInitialWindowSize(4 << 20),
		grpc.WithInitialConnWindowSize(16 << 20),
		grpc.WithReadBufferSize(256 << 10),
		AuthDialOption(tok),
		grpc.WithContextDialer(dialer.Dial),
	}, o.dialOpts...)
	cc, err := grpc.NewClient(tgt, dopts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	cc.Connect()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			break
		}
		if s == connectivity.TransientFailure || s == connectivity.Shutdown {
			cc.Close()
			if err := dialer.Err(); err != nil {
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			return nil, fmt.Errorf("dial %s: connection failed (%s)", addr, s)
		}
		if !cc.WaitForStateChange(ctx, s) {
			cc.Close()
			return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
		}
	}
	return &Client{cc: cc, api: gloadpb.NewLoaderClient(cc), addr: addr, maxMsg: o.maxMsg, dialer: dialer}, nil
}

// Server returns the identity of the server last reached: its uid, gid and
// pid (UID -1 when unknown: a TCP server the kernel does not list as local).
func (c *Client) Server() access.Peer { return c.dialer.Last() }

// Close closes the connection (and every stream on it).
func (c *Client) Close() error {
	if err := c.cc.Close(); err != nil {
		return fmt.Errorf("close connection to %s: %w", c.addr, err)
	}
	return nil
}

// Datasets lists the datasets the server serves.
func (c *Client) Datasets(ctx context.Context) ([]*gloadpb.DatasetInfo, error) {
	r, err := c.api.ListDatasets(ctx, &gloadpb.ListDatasetsRequest{})
	if err != nil {
		return nil, err
	}
	return r.Datasets, nil
}

// Plan describes the share of an epoch that open would stream.
func (c *Client) Plan(ctx context.Context, open *gloadpb.Open) (*gloadpb.PlanResponse, error) {
	return c.api.Plan(ctx, &gloadpb.PlanRequest{Open: open})
}

// Health asks whether the server is serving.
func (c *Client) Health(ctx context.Context) (*gloadpb.HealthResponse, error) {
	return c.api.Health(ctx, &gloadpb.HealthRequest{})
}
