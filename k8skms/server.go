package k8skms

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/ringkms/kms"
)

// Principal is the name of the plugin's calls in the service's records
// (kms.LocalCaller).
const Principal = "k8s-kms"

// DefaultKey is the held key used when Options.Key is empty.
const DefaultKey = "kubernetes"

// apiVersion is the version of the plugin API that Status answers.
const apiVersion = "v2"

// Options configure a Server. The zero value of each field is a working
// default.
type Options struct {
	// Key is the held key that seals the API server's data keys;
	// DefaultKey when empty. Attach makes it when missing.
	Key string

	// Logger receives one line per call (method, code, duration, the
	// API server's request uid) and the detail of every internal error;
	// never a plaintext or a ciphertext. Nil means silent.
	Logger *zerolog.Logger

	// Calls, when set, is told of every call once it is answered.
	Calls CallObserver
}

// CallObserver is told of each call: its method (Status, Encrypt,
// Decrypt), the gRPC code of its answer and its duration. Package
// metrics has one for Prometheus.
type CallObserver interface {
	ObserveGRPC(method, code string, d time.Duration)
}

// Server answers the KMS v2 plugin API. Until Attach gives it a Service,
// Status answers why it cannot serve, and Encrypt and Decrypt answer
// Unavailable.
type Server struct {
	kmsapi.UnsafeKeyManagementServiceServer
	opts Options
	log  zerolog.Logger
	grpc *grpc.Server

	backend atomic.Pointer[backend]
	// lastKeyID is the key_id Status answered last while healthy: its
	// answer while unhealthy, so that the API server, which makes a new
	// data key when the key_id changes, does not on an outage.
	lastKeyID atomic.Pointer[string]
	stopOnce  sync.Once
}

// backend is what the calls act with once attached.
type backend struct {
	svc *kms.Service
	p   *kms.Principal
}

// New returns a Server with opts.
func New(opts Options) *Server {
	if opts.Key == "" {
		opts.Key = DefaultKey
	}
	s := &Server{opts: opts, log: zerolog.Nop()}
	if opts.Logger != nil {
		s.log = *opts.Logger
	}
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(s.observe), grpc.MaxRecvMsgSize(maxMessage))
	kmsapi.RegisterKeyManagementServiceServer(s.grpc, s)
	return s
}

// maxMessage bounds a request: a ciphertext or plaintext under 1 KiB,
// a uid, a key_id and annotations of the plugin's own making (none).
const maxMessage = 64 << 10

// Key is the name of the held key the server uses.
func (s *Server) Key() string { return s.opts.Key }

// Attach makes the server serve with svc, as the service's local caller
// Principal using the held key of Options.Key, which it makes when
// missing (kms.LocalCaller). It fails when that key is not fit for the
// plugin (another type, exportable).
func (s *Server) Attach(ctx context.Context, svc *kms.Service) error {
	p, err := svc.LocalCaller(ctx, Principal, s.opts.Key)
	if err != nil {
		return err
	}
	s.backend.Store(&backend{svc: svc, p: p})
	return nil
}

// Serve answers the calls that come in on ln until Stop; it returns
// nil once stopped.
func (s *Server) Serve(ln net.Listener) error {
	err := s.grpc.Serve(ln)
	if err == grpc.ErrServerStopped {
		return nil
	}
	return err
}

// Stop lets the calls in flight finish, for up to timeout, then closes
// every connection.
func (s *Server) Stop(timeout time.Duration) {
	s.stopOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(timeout):
			s.grpc.Stop()
			<-done
		}
	})
}

// attached returns the backend and ctx carrying its principal, or an
// Unavailable error.
func (s *Server) attached(ctx context.Context) (*backend, context.Context, error) {
	b := s.backend.Load()
	if b == nil {
		return nil, ctx, kms.Errorf(kms.KindUnavailable, "kmsd has not started its service yet (its store cannot open): try again")
	}
	return b, kms.WithPrincipal(ctx, b.p), nil
}

// Status answers the plugin API's version, whether the key can encrypt
// now and, when it can, the key_id of its version.
func (s *Server) Status(ctx context.Context, _ *kmsapi.StatusRequest) (*kmsapi.StatusResponse, error) {
	out := &kmsapi.StatusResponse{Version: apiVersion, Healthz: "ok"}
	b, ctx, err := s.attached(ctx)
	var v kms.HeldKeyVersion
	if err == nil {
		v, err = b.svc.HeldKeyReady(ctx, s.opts.Key)
	}
	if err != nil {
		out.Healthz = s.reason(err)
		if last := s.lastKeyID.Load(); last != nil {
			out.KeyId = *last
		}
		return out, nil
	}
	out.KeyId = keyID(s.opts.Key, v.Version, v.KeyID)
	s.lastKeyID.Store(&out.KeyId)
	return out, nil
}

// Encrypt seals a plaintext (a data key of the API server) with the
// key's version that encrypts now.
func (s *Server) Encrypt(ctx context.Context, req *kmsapi.EncryptRequest) (*kmsapi.EncryptResponse, error) {
	switch n := len(req.GetPlaintext()); {
	case n == 0:
		return nil, status.Error(codes.InvalidArgument, "plaintext is empty")
	case n > MaxPlaintext:
		return nil, status.Errorf(codes.InvalidArgument, "plaintext has %d bytes; the most is %d, so that the ciphertext stays under %d", n, MaxPlaintext, MaxCiphertext)
	}
	b, ctx, err := s.attached(ctx)
	if err != nil {
		return nil, s.status(err)
	}
	res, err := b.svc.EncryptWithHeldKey(ctx, kms.HeldEncryptInput{Name: s.opts.Key, Items: []kms.HeldPlaintext{{Plaintext: req.Plaintext}}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, s.status(err)
	}
	it := res[0]
	return &kmsapi.EncryptResponse{Ciphertext: marshal(it.KeyVersion, it.Ciphertext), KeyId: keyID(s.opts.Key, it.KeyVersion, it.KeyID)}, nil
}

// Decrypt opens a ciphertext of Encrypt with the version it names.
func (s *Server) Decrypt(ctx context.Context, req *kmsapi.DecryptRequest) (*kmsapi.DecryptResponse, error) {
	version, sealed, err := unmarshal(req.GetCiphertext())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ciphertext: %v", err)
	}
	b, ctx, err := s.attached(ctx)
	if err != nil {
		return nil, s.status(err)
	}
	res, err := b.svc.DecryptWithHeldKey(ctx, kms.HeldDecryptInput{Name: s.opts.Key, Items: []kms.HeldSealed{{KeyVersion: version, Ciphertext: sealed}}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, s.status(err)
	}
	return &kmsapi.DecryptResponse{Plaintext: res[0].Plaintext}, nil
}

// keyID is the key_id of version (whose key is id) of the key name.
func keyID(name string, version int, id string) string {
	return name + ":v" + strconv.Itoa(version) + ":" + id
}

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
