package pgtest

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/netproxy"
)

// Proxy starts a netproxy (passing traffic) in front of the server of
// dbURL, closed at the end of the test, and returns it with the URL of
// the same database through it. A database on a Unix socket skips the
// test, since a TCP proxy needs a server reached over TCP; under CI=true
// it fails it instead.
func Proxy(t testing.TB, dbURL string) (*netproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if u.Host == "" {
		msg := "pgtest: the database is on a Unix socket (" + EnvURL + "): a TCP proxy needs one reached over TCP"
		if os.Getenv("CI") != "true" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	p := startProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// ProxyPrimary starts a netproxy (passing traffic) in front of the
// primary, closed at the end of the test, and returns it with MultiURL
// whose primary is reached through it.
func (p *Pair) ProxyPrimary() (*netproxy.Proxy, string) {
	p.t.Helper()
	np := startProxy(p.t, p.PrimaryAddr())
	return np, strings.Replace(p.MultiURL(), p.PrimaryAddr(), np.Addr(), 1)
}

func startProxy(t testing.TB, addr string) *netproxy.Proxy {
	t.Helper()
	p, err := netproxy.New(addr)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
