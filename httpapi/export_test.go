package httpapi

// RouteInfo is a line of the route table, as tests outside the package
// see it.
type RouteInfo struct {
	Method, Path       string
	Public, SecretPath bool
}

// Routes returns the route table: every route the handler serves.
func Routes() []RouteInfo {
	var out []RouteInfo
	for _, rt := range (&api{}).routes() {
		out = append(out, RouteInfo{Method: rt.method, Path: rt.path, Public: rt.public, SecretPath: rt.secretPath})
	}
	return out
}
