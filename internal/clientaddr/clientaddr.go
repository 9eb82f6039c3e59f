// Package clientaddr tells the address of an HTTP request's client: the
// connection's, or, behind trusted reverse proxies, the one they appended
// to a header such as X-Forwarded-For. The handlers of the service
// (httpapi, transit) share it, so that rate limits and login throttles
// count a client alike whichever interface it calls.
package clientaddr

import (
	"net"
	"net/http"
	"strings"
)

// Of returns the address of r's client: from the request header named
// header (canonical) when it is set and present (Forwarded), else the
// connection's; "" when neither gives one.
func Of(r *http.Request, header string, hops int) string {
	if header != "" {
		if ip := Forwarded(r.Header.Values(header), hops); ip != nil {
			return ip.String()
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}

// Forwarded returns the client address that the lines of a header such
// as X-Forwarded-For ("client, proxy1, proxy2") give, behind hops trusted
// proxies that each append the address they received the request from:
// the hops-th address from the right, the one the outermost trusted proxy
// appended. What lies left of it came with the request, and the client
// could have written it. A list shorter than hops was appended by trusted
// proxies only (the request entered behind the outermost): its leftmost
// address is taken. Nil when that entry is not an IP address.
func Forwarded(lines []string, hops int) net.IP {
	n, entry := 0, ""
	for i := len(lines) - 1; i >= 0 && n < hops; i-- {
		rest := lines[i]
		for n < hops {
			j := strings.LastIndexByte(rest, ',')
			entry = rest[j+1:]
			n++
			if j < 0 {
				break
			}
			rest = rest[:j]
		}
	}
	if n == 0 {
		return nil
	}
	return net.ParseIP(strings.TrimSpace(entry))
}
