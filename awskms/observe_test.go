package awskms_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/awskms"
	"github.com/ringkms/kms/kmstest"
)

// routes is a RequestObserver that keeps the routes it is told of.
type routes struct {
	mu   sync.Mutex
	seen []string
}

func (o *routes) ObserveRequest(_, route string, _ int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, route)
}

// The request observer (and the log line) name each call by its
// operation, and a request that names none served by the path.
func TestRoutesByOperation(t *testing.T) {
	env := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	obs := &routes{}
	_, url := kmstest.Serve(t, awskms.New(env.Service, awskms.Options{Requests: obs}), "")
	key, err := env.Service.CreateAPIKey(env.RootCtx, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true, Flags: kms.Flags{"*": true}})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{url: url, id: key.KeyID, secret: key.Key}
	c.do(t, "CreateKey", map[string]any{}, nil)
	c.do(t, "ListKeys", map[string]any{}, nil)
	c.do(t, "ConnectCustomKeyStore", map[string]any{}, nil)
	// The observer is told once the answer is written: the client may
	// read it first.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		obs.mu.Lock()
		n := len(obs.seen)
		obs.mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{"TrentService.CreateKey", "TrentService.ListKeys", "/"}; !slices.Equal(obs.seen, want) {
		t.Errorf("routes observed %q, want %q", obs.seen, want)
	}
}
