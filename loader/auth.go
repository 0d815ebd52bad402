package loader

import (
	"context"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/access"
)

// authorize refuses a call whose metadata does not carry the server's token.
func (s *Server) authorize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if access.Allowed(md.Get(access.MetadataKey), s.cfg.AuthToken) {
		markAuthenticated(ctx)
		return nil
	}
	s.metrics.authRefused.Inc()
	if len(md.Get(access.MetadataKey)) == 0 {
		return status.Error(codes.Unauthenticated, "authorization: this server needs a bearer token (the file given to --auth-token-file; clients take it from GLOAD_AUTH_TOKEN or their auth_token option)")
	}
	return status.Error(codes.Unauthenticated, "authorization: wrong bearer token")
}

// authOptions are the interceptors that check the token on every RPC.
func (s *Server) authOptions() []grpc.ServerOption {
	if s.cfg.AuthToken == "" {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.authorize(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.authorize(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// authHTTP guards an HTTP handler (/metrics) with the same token.
func (s *Server) authHTTP(h http.Handler) http.Handler {
	if s.cfg.AuthToken == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !access.Allowed(r.Header.Values(access.MetadataKey), s.cfg.AuthToken) {
			s.metrics.authRefused.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="gload"`)
			http.Error(w, "gload: bearer token required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// warnOpenTCP logs when a TCP listener serves without a token: every user of
// the host (or of the network, with --allow-remote) can then read the data.
func (s *Server) warnOpenTCP(lis net.Listener) {
	if s.cfg.AuthToken == "" && lis.Addr().Network() != "unix" {
		s.log.Warn("TCP listener without an auth token: anyone who can reach it can read the datasets; use a unix socket or --auth-token-file",
			"addr", addrString(lis.Addr()))
	}
}
