package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/unixsock"
	"github.com/ringkms/kms/k8skms"
)

// k8sPlugin is the Kubernetes KMS v2 plugin of -k8s-kms-socket (package
// k8skms): its socket, made before kmsd touches its data, and its
// server. A nil *k8sPlugin is the plugin turned off: its methods do
// nothing.
type k8sPlugin struct {
	srv *k8skms.Server
}

// listenK8s makes the plugin's socket (internal/unixsock: mode 0600, a
// stale socket replaced). A path that holds anything else, or where no
// socket can be made, is a usage error (exit status 2), and left as it
// was.
func listenK8s(c *config, ms *metricsServer, log *zerolog.Logger) (*k8sPlugin, error) {
	if c.k8sSocket == "" {
		return nil, nil
	}
	ln, err := unixsock.Listen(c.k8sSocket)
	if err != nil {
		return nil, usagef("-k8s-kms-socket: %v", err)
	}
	plog := log.With().Str("api", "k8s-kms").Logger()
	opts := k8skms.Options{Key: c.k8sKey, Logger: &plog}
	if ms != nil {
		opts.Calls = ms.m
	}
	p := &k8sPlugin{srv: k8skms.New(opts)}
	go func() {
		// Calls before Attach are answered that kmsd is not ready yet
		// (Status says why): the API server waits, as for any plugin
		// that starts.
		if err := p.srv.Serve(ln); err != nil {
			plog.Error().Err(err).Str("socket", c.k8sSocket).Msg("the Kubernetes KMS plugin's socket stopped serving")
		}
	}()
	return p, nil
}

// attach makes the plugin serve with svc (k8skms.Server.Attach). A key
// of the plugin's name unfit for it is a usage error.
func (p *k8sPlugin) attach(ctx context.Context, svc *kms.Service) error {
	if p == nil {
		return nil
	}
	if err := p.srv.Attach(ctx, svc); err != nil {
		if kms.ErrorKind(err) == kms.KindInvalid {
			return usagef("-k8s-kms-key: %s", kms.ErrorMessage(err))
		}
		return err
	}
	return nil
}

// stop ends the plugin's calls, those in flight within timeout, and
// removes its socket.
func (p *k8sPlugin) stop(timeout time.Duration) {
	if p == nil {
		return
	}
	p.srv.Stop(timeout)
}
