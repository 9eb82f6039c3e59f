package httpapi_test

import (
	"bufio"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
)

// The route walk: every route of the router, with no credential, with a
// credential that lacks the flag the route needs, and with one that holds
// it. The flag of each route comes from walkCases, which must agree with
// the table of docs/PERMISSIONS.md, and the public routes with its list of
// public routes: a route added to the router without a line in both fails
// TestRouteWalk.

// permissionsDoc is the file that lists the flag of every route.
const permissionsDoc = "../docs/PERMISSIONS.md"

// Pseudo-flags of walkCase.flag and of the doc's table.
const (
	flagPublic = "public" // no credential needed
	flagSelf   = "self"   // a User's own access token; an API key is refused (400)
)

// unrelatedFlag is the one flag of the credential that lacks the flag.
const unrelatedFlag = "keyring.unrelated.read"

// walkCase is one route of the walk: what it needs and a request that
// reaches the point where the Service checks it.
type walkCase struct {
	flag string   // as in the doc: a flag (<ring> for the ring of the request), flagPublic or flagSelf
	also []string // further flags the Service checks, which the doc's notes name
	ring string   // the ring <ring> stands for
	path string   // the path with its parameters filled in, and a query
	body any
	// account, when set, is the Account (ID) of the credential that holds
	// the flag, in place of the test Account: one whose every credential
	// it covers, for a route under the reach rule.
	account string
}

// walkFixtures are the resources the walk's requests name.
type walkFixtures struct {
	ringID, keyID, hash, header, assetID string
	asymKeyID                            string
	walker, walkerPassword, doomedUser   string
	doomedAccount, reachAccount          string
	keyID2, keySecret, doomedKeySecret   string
	activityID                           string
	inviteToken                          string
}

// walkCases maps each route ("METHOD /pattern") to its walkCase.
func walkCases(e *env, f *walkFixtures) map[string]walkCase {
	ks, asym := "walk", "walkasym"
	return map[string]walkCase{
		"GET /healthz":      {flag: flagPublic, path: "/healthz"},
		"GET /openapi.json": {flag: flagPublic, path: "/openapi.json"},

		"GET /ks/hash/:hash":                                {flag: "keyring.<ring>.read", ring: ks, path: "/ks/hash/" + f.hash},
		"GET /ks/header/:header":                            {flag: "keyring.<ring>.read", ring: ks, path: "/ks/header/" + f.header},
		"GET /ks/signing-keys":                              {flag: flagPublic, path: "/ks/signing-keys"},
		"POST /ks/decrypt":                                  {flag: "keyring.<ring>.decrypt", ring: ks, path: "/ks/decrypt", body: map[string]any{"hash": f.hash, "header": f.header}},
		"POST /ks/encrypt":                                  {flag: "keyring.<ring>.encrypt", ring: ks, path: "/ks/encrypt", body: map[string]any{"ringname": ks}},
		"POST /ks/encrypt/batch":                            {flag: "keyring.<ring>.encrypt", ring: ks, path: "/ks/encrypt/batch", body: map[string]any{"ringname": ks, "count": 2}},
		"POST /ks/decrypt/batch":                            {flag: "keyring.<ring>.decrypt", ring: ks, path: "/ks/decrypt/batch", body: map[string]any{"items": []map[string]any{{"hash": f.hash, "header": f.header}}}},
		"POST /ks/rotate":                                   {flag: "keyring.<ring>.rotate", ring: ks, path: "/ks/rotate", body: map[string]any{"ringname": ks}},
		"POST /ks/keyrings":                                 {flag: "keyring.<ring>.create", ring: "walknew", path: "/ks/keyrings", body: map[string]any{"name": "walknew", "kem": "x25519"}},
		"GET /ks/keyrings":                                  {flag: "keyring.*.read", path: "/ks/keyrings"},
		"GET /ks/keyrings/:ringname":                        {flag: "keyring.<ring>.read", ring: ks, path: "/ks/keyrings/" + ks},
		"GET /ks/config":                                    {flag: "keyring.<ring>.read", ring: ks, path: "/ks/config?ringname=" + ks},
		"PUT /ks/config":                                    {flag: "keyring.<ring>.config", ring: ks, path: "/ks/config", body: map[string]any{"ringname": ks, "config": map[string]any{"props": map[string]any{}}}},
		"DELETE /ks/keyrings/:ringname":                     {flag: "keyring.<ring>.delete", ring: "walkdel", path: "/ks/keyrings/walkdel"},
		"GET /ks/keyrings/:ringname/keys":                   {flag: "keyring.<ring>.read", ring: ks, path: "/ks/keyrings/" + ks + "/keys?limit=1"},
		"GET /ks/keyrings/:ringname/keys/:keyId":            {flag: "keyring.<ring>.read", ring: ks, path: "/ks/keyrings/" + f.ringID + "/keys/" + f.keyID + "?id=true"},
		"PATCH /ks/keyrings/:ringname/keys/:keyId":          {flag: "keyring.<ring>.keys", ring: ks, path: "/ks/keyrings/" + ks + "/keys/" + f.keyID, body: map[string]any{"state": "enabled"}},
		"POST /ks/keyrings/:ringname/keys/:keyId/destroy":   {flag: "keyring.<ring>.keys", ring: ks, path: "/ks/keyrings/" + ks + "/keys/" + f.keyID + "/destroy", body: map[string]any{"after": "1h"}},
		"DELETE /ks/keyrings/:ringname/keys/:keyId/destroy": {flag: "keyring.<ring>.keys", ring: ks, path: "/ks/keyrings/" + ks + "/keys/" + f.keyID + "/destroy"},
		"GET /ks/keyrings/:ringname/keys/:keyId/usage":      {flag: "keyring.<ring>.read", ring: ks, path: "/ks/keyrings/" + ks + "/keys/" + f.keyID + "/usage"},
		"GET /ks/keyrings/:ringname/keys/:keyId/hashes":     {flag: "keyring.<ring>.read", also: []string{kms.FlagActivityRead}, ring: ks, path: "/ks/keyrings/" + ks + "/keys/" + f.keyID + "/hashes?limit=2"},

		"GET /assets/:id":         {flag: "assets.read", path: "/assets/" + f.assetID},
		"DELETE /assets/:id":      {flag: "assets.delete", path: "/assets/" + f.assetID},
		"POST /assets/search":     {flag: "assets.read", path: "/assets/search", body: map[string]any{}},
		"GET /assets/:id/lineage": {flag: "assets.read", path: "/assets/" + f.assetID + "/lineage"},

		"POST /asym/keyrings":                                 {flag: "keyring.<ring>.create", ring: "walkasymnew", path: "/asym/keyrings", body: map[string]any{"name": "walkasymnew"}},
		"GET /asym/keyrings/:ringname/keys/:keyId":            {flag: "keyring.<ring>.read", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID},
		"PATCH /asym/keyrings/:ringname/keys/:keyId":          {flag: "keyring.<ring>.keys", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID, body: map[string]any{"state": "enabled"}},
		"POST /asym/keyrings/:ringname/keys/:keyId/destroy":   {flag: "keyring.<ring>.keys", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID + "/destroy", body: map[string]any{"after": "1h"}},
		"DELETE /asym/keyrings/:ringname/keys/:keyId/destroy": {flag: "keyring.<ring>.keys", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID + "/destroy"},
		"GET /asym/keyrings/:ringname/keys/:keyId/usage":      {flag: "keyring.<ring>.read", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID + "/usage"},
		"GET /asym/keyrings/:ringname/keys/:keyId/export":     {flag: "keyring.<ring>.export", ring: asym, path: "/asym/keyrings/" + asym + "/keys/" + f.asymKeyID + "/export"},
		"POST /asym/rotate":                                   {flag: "keyring.<ring>.rotate", ring: asym, path: "/asym/rotate", body: map[string]any{"ringname": asym}},
		"GET /asym/config":                                    {flag: "keyring.<ring>.read", ring: asym, path: "/asym/config?ringname=" + asym},
		"PUT /asym/config":                                    {flag: "keyring.<ring>.config", ring: asym, path: "/asym/config", body: map[string]any{"ringname": asym, "config": map[string]any{"props": map[string]any{}}}},

		"POST /auth/validate":                          {flag: "apikeys.validate", path: "/auth/validate", body: map[string]any{"key": f.keySecret}},
		"POST /auth/user/invite":                       {flag: "users.write", path: "/auth/user/invite", body: e.userBody("walkinvite")},
		"GET /auth/user/invite-validate":               {flag: flagPublic, path: "/auth/user/invite-validate?token=" + url.QueryEscape(f.inviteToken)},
		"POST /auth/user/invite-complete":              {flag: flagPublic, path: "/auth/user/invite-complete", body: map[string]any{"token": f.inviteToken, "password": "weak"}},
		"POST /auth/basic/login":                       {flag: flagPublic, path: "/auth/basic/login", body: map[string]any{"username": f.walker}},
		"GET /auth/basic/refresh":                      {flag: flagSelf, path: "/auth/basic/refresh"},
		"POST /auth/basic/logout":                      {flag: flagSelf, path: "/auth/basic/logout"},
		"POST /auth/basic/reset-password-start":        {flag: flagPublic, path: "/auth/basic/reset-password-start", body: map[string]any{"email": "nobody@example.com"}},
		"POST /auth/basic/reset-password-complete":     {flag: flagPublic, path: "/auth/basic/reset-password-complete", body: map[string]any{"token": "rkr_x", "password": "weak"}},
		"GET /auth/basic/reset-password-complete":      {flag: flagPublic, path: "/auth/basic/reset-password-complete?token=rkr_x"},
		"GET /auth/users/:username":                    {flag: "users.read", path: "/auth/users/" + f.walker},
		"PATCH /auth/users/:username":                  {flag: "users.write", path: "/auth/users/" + f.walker, body: map[string]any{"lastName": "Walked"}},
		"DELETE /auth/users/:username":                 {flag: "users.write", path: "/auth/users/" + f.doomedUser},
		"GET /auth/users":                              {flag: "users.read", path: "/auth/users"},
		"POST /auth/users":                             {flag: "users.write", path: "/auth/users", body: e.userBody("walknewuser")},
		"POST /auth/accounts":                          {flag: "accounts.write", also: []string{kms.FlagAllAccounts}, path: "/auth/accounts", body: map[string]any{"uid": "walknew"}},
		"GET /auth/accounts":                           {flag: "accounts.read", path: "/auth/accounts"},
		"GET /auth/accounts/:id":                       {flag: "accounts.read", path: "/auth/accounts/" + e.account},
		"PATCH /auth/accounts/:id":                     {flag: "accounts.write", path: "/auth/accounts/walkreach?uid=true", body: map[string]any{"notes": "walked"}, account: f.reachAccount},
		"DELETE /auth/accounts/:id":                    {flag: "accounts.write", also: []string{kms.FlagAllAccounts}, path: "/auth/accounts/" + f.doomedAccount},
		"GET /auth/accounts/:id/apikeys":               {flag: "apikeys.read", path: "/auth/accounts/" + e.account + "/apikeys"},
		"GET /auth/apikey":                             {flag: "apikeys.read", path: "/auth/apikey"},
		"POST /auth/apikey":                            {flag: "apikeys.write", path: "/auth/apikey", body: map[string]any{"accountId": e.account, "flags": map[string]bool{}}},
		"PUT /auth/apikey":                             {flag: "apikeys.write", path: "/auth/apikey", body: map[string]any{"op": "merge", "key": f.keySecret, "props": map[string]any{"walked": true}}},
		"PUT /auth/apikeyid":                           {flag: "apikeys.write", path: "/auth/apikeyid", body: map[string]any{"op": "merge", "apikeyid": f.keyID2, "props": map[string]any{"walked": true}}},
		"GET /auth/apikey/:apikeyid":                   {flag: "apikeys.read", path: "/auth/apikey/" + f.keyID2},
		"GET /auth/apikey/:apikeyid/props":             {flag: "apikeys.read", path: "/auth/apikey/" + f.keyID2 + "/props"},
		"DELETE /auth/apikey/:apikey":                  {flag: "apikeys.write", path: "/auth/apikey/" + f.doomedKeySecret},
		"GET /auth/search/keyring/:keyringname/apikey": {flag: "apikeys.read", path: "/auth/search/keyring/" + ks + "/apikey"},
		"POST /auth/search/activity":                   {flag: "activity.read", path: "/auth/search/activity?limit=5", body: map[string]any{"action": "encrypt"}},
		"GET /auth/activity/:id":                       {flag: "activity.read", path: "/auth/activity/" + f.activityID},
	}
}

// setUpWalk creates the resources the walk's requests name.
func setUpWalk(t *testing.T, e *env) *walkFixtures {
	t.Helper()
	f := &walkFixtures{}
	created := e.createRing(t, "walk")
	f.ringID, f.keyID = created.Ring.ID, created.Key.ID
	// An Asset of the test Account, which the walk's API keys belong to.
	encrypter, _ := e.apiKey(t, "keyring.walk.encrypt")
	enc := e.do(t, "POST", "/ks/encrypt", encrypter, map[string]any{"ringname": "walk", "asset": map[string]any{"data": map[string]any{"n": 1}}}).want(t, http.StatusOK)
	res := decode[kms.EncryptResult](t, enc)
	f.hash, f.header, f.assetID = res.Hash, res.Header, res.Asset.ID
	e.createRing(t, "walkdel")
	asym := decode[kms.CreateAsymKeyRingResult](t, e.do(t, "POST", "/asym/keyrings", e.root, map[string]any{"name": "walkasym"}).want(t, http.StatusOK))
	f.asymKeyID = asym.Key.ID

	walker, pw := e.createUser(t, "walker")
	f.walker, f.walkerPassword = walker.Username, pw
	e.do(t, "POST", "/auth/users", e.root, e.userBody("walkdoomed")).want(t, http.StatusOK)
	f.doomedUser = "walkdoomed"
	inv := decode[map[string]string](t, e.do(t, "POST", "/auth/user/invite", e.root, e.userBody("walkinvitee")).want(t, http.StatusOK))
	u, err := url.Parse(inv["loginUrl"])
	if err != nil {
		t.Fatal(err)
	}
	f.inviteToken = u.Query().Get("token")

	acct := decode[kms.Account](t, e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "walkdoomed"}).want(t, http.StatusOK))
	f.doomedAccount = acct.ID
	acct = decode[kms.Account](t, e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "walkreach"}).want(t, http.StatusOK))
	f.reachAccount = acct.ID
	f.keySecret, _ = e.apiKey(t)
	_, f.keyID2 = e.apiKey(t)
	f.doomedKeySecret, _ = e.apiKey(t)
	f.activityID = e.activity(t, func(*kms.Activity) bool { return true })[0].ID
	return f
}

// docPath writes a router pattern as the doc does: {name} for :name.
func docPath(pattern string) string {
	return regexp.MustCompile(`:(\w+)`).ReplaceAllString(pattern, "{$1}")
}

// patternMatches reports whether path (without its query) is one that
// pattern serves.
func patternMatches(pattern, path string) bool {
	path, _, _ = strings.Cut(path, "?")
	re := "^" + regexp.MustCompile(`:\w+`).ReplaceAllString(regexp.QuoteMeta(pattern), `[^/]+`) + "$"
	return regexp.MustCompile(re).MatchString(path)
}

// docRow is a line of the route table of docs/PERMISSIONS.md.
type docRow struct {
	flag, notes string
}

// readPermissionsDoc parses docs/PERMISSIONS.md: the table of routes
// ("| method | path | flag | notes |", keyed "METHOD /path" with {name}
// parameters) and the fenced list under "## Public routes".
func readPermissionsDoc(t *testing.T) (map[string]docRow, []string) {
	t.Helper()
	file, err := os.Open(permissionsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows := map[string]docRow{}
	var public []string
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	section, fence := "", false
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			fence = !fence
		case fence && section == "## Public routes" && line != "":
			public = append(public, strings.Join(strings.Fields(line), " "))
		case !fence && strings.HasPrefix(line, "## "):
			section = line
		case !fence && strings.HasPrefix(line, "|") && section != "## Transit (Vault's interface)":
			// (The transit section's table is package transit's, which
			// checks it.)
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if len(cells) < 3 || !slices.Contains(methods, cells[0]) {
				continue
			}
			key := cells[0] + " " + strings.Trim(cells[1], "`")
			if _, dup := rows[key]; dup {
				t.Errorf("%s: route %s has two lines", permissionsDoc, key)
			}
			row := docRow{flag: strings.Trim(cells[2], "`")}
			if len(cells) > 3 {
				row.notes = cells[3]
			}
			rows[key] = row
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || len(public) == 0 {
		t.Fatalf("%s: found %d table lines and %d public routes; has its layout changed?", permissionsDoc, len(rows), len(public))
	}
	return rows, public
}

// TestPermissionsDoc checks that docs/PERMISSIONS.md lists every route of
// the router once, with the flag the walk uses, and the router's public
// routes, no more and no fewer.
func TestPermissionsDoc(t *testing.T) {
	rows, public := readPermissionsDoc(t)
	cases := walkCases(&env{}, &walkFixtures{})
	served := map[string]bool{}
	var routerPublic []string
	for _, rt := range httpapi.Routes() {
		key := rt.Method + " " + docPath(rt.Path)
		served[key] = true
		if rt.Public {
			routerPublic = append(routerPublic, key)
		}
		c, ok := cases[rt.Method+" "+rt.Path]
		if !ok {
			t.Errorf("route %s %s has no walkCase: give it one, with its flag", rt.Method, rt.Path)
			continue
		}
		row, ok := rows[key]
		if !ok {
			t.Errorf("route %s is not in the table of %s", key, permissionsDoc)
			continue
		}
		if row.flag != c.flag {
			t.Errorf("route %s: %s says flag %q, the walk %q", key, permissionsDoc, row.flag, c.flag)
		}
		for _, f := range c.also {
			if !strings.Contains(row.notes, "`"+f+"`") {
				t.Errorf("route %s: %s does not note the flag %s it also needs", key, permissionsDoc, f)
			}
		}
		if (c.flag == flagPublic) != rt.Public {
			t.Errorf("route %s: public = %v in the router, flag %q in the walk", key, rt.Public, c.flag)
		}
	}
	for key := range rows {
		if !served[key] {
			t.Errorf("%s lists %s, which the router does not serve", permissionsDoc, key)
		}
	}
	if len(cases) != len(served) {
		t.Errorf("walkCases has %d routes, the router %d", len(cases), len(served))
	}
	slices.Sort(public)
	slices.Sort(routerPublic)
	if !slices.Equal(public, routerPublic) {
		t.Errorf("public routes: %s lists\n\t%s\nthe router has\n\t%s", permissionsDoc, strings.Join(public, "\n\t"), strings.Join(routerPublic, "\n\t"))
	}
}

// wantReached fails the test when r is a 401, a 403, or an answer of the
// router rather than of a route (404 without a route, 405).
func wantReached(t *testing.T, r reply) {
	t.Helper()
	switch {
	case r.status == http.StatusUnauthorized || r.status == http.StatusForbidden:
		t.Errorf("%s %s = %d, want neither 401 nor 403; body %s", r.method, r.path, r.status, r.body)
	case r.status == http.StatusMethodNotAllowed,
		r.status == http.StatusNotFound && strings.Contains(string(r.body), "no endpoint"):
		t.Errorf("%s %s = %d: the walk's request does not reach its route; body %s", r.method, r.path, r.status, r.body)
	}
}

// TestRouteWalk walks every route with no credential (401), a credential
// that lacks its flag (403), and one that holds it (neither). Public routes
// answer without a credential.
func TestRouteWalk(t *testing.T) {
	e := newEnv(t)
	f := setUpWalk(t, e)
	cases := walkCases(e, f)
	lacking, _ := e.apiKey(t, unrelatedFlag)
	for _, rt := range httpapi.Routes() {
		c, ok := cases[rt.Method+" "+rt.Path]
		if !ok {
			t.Errorf("route %s %s has no walkCase", rt.Method, rt.Path)
			continue
		}
		if !patternMatches(rt.Path, c.path) {
			t.Errorf("walkCase of %s %s has path %s, which the route does not serve", rt.Method, rt.Path, c.path)
			continue
		}
		name := rt.Method + " " + rt.Path
		t.Run(name, func(t *testing.T) {
			if c.flag == flagPublic {
				wantReached(t, e.do(t, rt.Method, c.path, "", c.body))
				return
			}
			e.do(t, rt.Method, c.path, "", c.body).wantError(t, http.StatusUnauthorized, "unauthenticated")
			if c.flag == flagSelf {
				// No flag grants it: an API key is the wrong credential.
				e.do(t, rt.Method, c.path, lacking, c.body).wantError(t, http.StatusBadRequest, "invalid")
				token := e.login(t, f.walker, f.walkerPassword)
				wantReached(t, e.do(t, rt.Method, c.path, token, c.body))
				return
			}
			e.do(t, rt.Method, c.path, lacking, c.body).wantError(t, http.StatusForbidden, "permission_denied")
			flag := strings.ReplaceAll(c.flag, "<ring>", c.ring)
			if len(c.also) > 0 {
				only, _ := e.apiKey(t, flag)
				e.do(t, rt.Method, c.path, only, c.body).wantError(t, http.StatusForbidden, "permission_denied")
			}
			account := e.account
			if c.account != "" {
				account = c.account
			}
			holding, _ := e.apiKeyIn(t, account, append([]string{flag}, c.also...)...)
			wantReached(t, e.do(t, rt.Method, c.path, holding, c.body))
		})
	}
}

// TestRouteWalkCoversFlags checks the walk's own table: each flag is one
// of kms's, or a ring flag.
func TestRouteWalkCoversFlags(t *testing.T) {
	known := []string{flagPublic, flagSelf, kms.FlagUsersRead, kms.FlagUsersWrite, kms.FlagAccountsRead, kms.FlagAccountsWrite,
		kms.FlagAllAccounts, kms.FlagAPIKeysRead, kms.FlagAPIKeysWrite, kms.FlagAPIKeysValidate, kms.FlagActivityRead,
		kms.FlagAssetsRead, kms.FlagAssetsDelete}
	ops := []string{kms.OpCreate, kms.OpRead, kms.OpEncrypt, kms.OpDecrypt, kms.OpRotate, kms.OpConfig, kms.OpDelete, kms.OpKeys, kms.OpExport}
	for key, c := range walkCases(&env{}, &walkFixtures{}) {
		ok := slices.Contains(known, c.flag)
		for _, op := range ops {
			ok = ok || c.flag == kms.RingFlag("<ring>", op) || c.flag == kms.RingFlag("*", op)
		}
		if !ok {
			t.Errorf("walkCase %s: flag %q is not a flag of kms", key, c.flag)
		}
		if strings.Contains(c.flag, "<ring>") && c.ring == "" {
			t.Errorf("walkCase %s: flag %q names no ring", key, c.flag)
		}
	}
}

// TestUnknownIDsAreNotFound checks every route that names a resource by
// an ID (or a username, uid or key ID) in its path: a value that names no
// resource answers 404, whether it is an ID of the right form that no
// resource has, or one that no ID could ever be (too short, not hex,
// longer than the store's keys may be).
func TestUnknownIDsAreNotFound(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "known")
	e.do(t, "POST", "/asym/keyrings", e.root, map[string]any{"name": "aknown"}).want(t, http.StatusOK)
	unknown := []string{
		"01a2000000000000000000000000beef", // the form of an ID
		"nope",
		"01A2000000000000000000000000BEEF",
		strings.Repeat("a", 70000),
	}
	paths := []struct{ method, path, query string }{
		{"GET", "/assets/%s", ""},
		{"DELETE", "/assets/%s", ""},
		{"GET", "/assets/%s/lineage", ""},
		{"GET", "/ks/keyrings/%s", "?id=true"},
		{"GET", "/ks/keyrings/%s/keys", "?id=true"},
		{"GET", "/ks/keyrings/%s/keys/01a2000000000000000000000000beef", "?id=true"},
		{"GET", "/ks/keyrings/known/keys/%s", ""},
		{"GET", "/asym/keyrings/%s/keys/01a2000000000000000000000000beef", "?id=true"},
		{"GET", "/asym/keyrings/aknown/keys/%s", ""},
		{"GET", "/auth/accounts/%s", ""},
		{"GET", "/auth/accounts/%s", "?uid=true"},
		{"PATCH", "/auth/accounts/%s", ""},
		{"DELETE", "/auth/accounts/%s", ""},
		{"DELETE", "/auth/accounts/%s", "?uid=true"},
		{"GET", "/auth/accounts/%s/apikeys", ""},
		{"GET", "/auth/accounts/%s/apikeys", "?uid=true"},
		{"GET", "/auth/apikey/%s", ""},
		{"GET", "/auth/apikey/%s/props", ""},
		{"DELETE", "/auth/apikey/%s", "?id=true"},
		{"DELETE", "/auth/apikey/%s", ""},
		{"GET", "/auth/search/keyring/%s/apikey", "?id=true"},
		{"GET", "/auth/users/%s", ""},
		{"GET", "/auth/users/%s", "?id=true"},
		{"GET", "/auth/users/%s", "?email=true"},
		{"PATCH", "/auth/users/%s", ""},
		{"DELETE", "/auth/users/%s", "?id=true"},
		{"GET", "/auth/activity/%s", ""},
	}
	for _, p := range paths {
		for _, id := range unknown {
			name := id
			if len(name) > 40 {
				name = "long"
			}
			t.Run(p.method+" "+p.path+p.query+" "+name, func(t *testing.T) {
				var body any
				if p.method == "PATCH" {
					body = map[string]any{}
				}
				path := strings.Replace(p.path, "%s", id, 1) + p.query
				r := e.do(t, p.method, path, e.root, body)
				r.path = p.method + " " + p.path + p.query + " with " + name
				r.wantError(t, http.StatusNotFound, "not_found")
			})
		}
	}
}
