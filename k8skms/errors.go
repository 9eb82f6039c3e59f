package k8skms

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms"
)

// codeOf is the gRPC code of an error of the service, by its kind.
func codeOf(err error) codes.Code {
	switch kms.ErrorKind(err) {
	case kms.KindInvalid, kms.KindTooLarge:
		return codes.InvalidArgument
	case kms.KindUnprocessable:
		// A ciphertext altered, or sealed by another key: the same
		// answer as one that does not parse.
		return codes.InvalidArgument
	case kms.KindUnauthenticated:
		return codes.Unauthenticated
	case kms.KindPermissionDenied:
		return codes.PermissionDenied
	case kms.KindNotFound, kms.KindDisabled, kms.KindDestroyed, kms.KindConflict:
		// The key, or the version a ciphertext names, is not there or
		// not usable: the system is not in a state to serve the call.
		return codes.FailedPrecondition
	case kms.KindLimit, kms.KindRateLimited, kms.KindNoSpace:
		return codes.ResourceExhausted
	case kms.KindUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

// message is what a caller is told of err: the service's message, but
// for an internal error, whose detail goes to the log only.
func message(err error) string {
	if codeOf(err) == codes.Internal {
		return "internal error: see kmsd's log"
	}
	return kms.ErrorMessage(err)
}

// status is the answer of a call that failed with err; the detail of
// an internal error goes to the log.
func (s *Server) status(err error) error {
	c := codeOf(err)
	if c == codes.Internal {
		s.log.Error().Err(err).Msg("k8s kms call failed")
	}
	return status.Error(c, message(err))
}

// reason is Status's healthz while the key cannot encrypt: why.
func (s *Server) reason(err error) string {
	if codeOf(err) == codes.Internal {
		s.log.Error().Err(err).Msg("k8s kms status")
	}
	return message(err)
}

// methods names the calls of the plugin API by their full gRPC method.
var methods = map[string]string{
	kmsapi.KeyManagementService_Status_FullMethodName:  "Status",
	kmsapi.KeyManagementService_Encrypt_FullMethodName: "Encrypt",
	kmsapi.KeyManagementService_Decrypt_FullMethodName: "Decrypt",
}

// uidOf is the API server's uid of a request, which names the call in
// the API server's log too.
type uidOf interface{ GetUid() string }

// observe logs each call on one line and tells Options.Calls of it.
func (s *Server) observe(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	d := time.Since(start)
	code := status.Code(err)
	method := methods[info.FullMethod]
	if s.opts.Calls != nil {
		s.opts.Calls.ObserveGRPC(method, code.String(), d)
	}
	ev := s.log.WithLevel(level(code))
	if ev.Enabled() {
		ev = ev.Str("method", method).Str("code", code.String()).Dur("duration", d).Str("principal", Principal)
		if u, ok := req.(uidOf); ok && u.GetUid() != "" {
			ev = ev.Str("uid", u.GetUid())
		}
		if err != nil {
			ev = ev.Str("error", status.Convert(err).Message())
		}
		ev.Msg("call")
	}
	return resp, err
}

// level is the level of a call's log line: info, but warn for
// Unavailable and ResourceExhausted (an outage the service rides out, a
// full disk, a limit) and error for Internal (a fault).
func level(c codes.Code) zerolog.Level {
	switch c {
	case codes.Unavailable, codes.ResourceExhausted:
		return zerolog.WarnLevel
	case codes.Internal:
		return zerolog.ErrorLevel
	}
	return zerolog.InfoLevel
}
