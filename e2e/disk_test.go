package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// smallFS mounts a tmpfs of size bytes on dir (created if need be) and
// unmounts it at the end of the test. Mounting needs root: without it the
// test is skipped, saying so; as root, a mount that fails fails the test
// under CI=true and skips it elsewhere.
func smallFS(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (the disk-full tests); run the tests as root, as CI does")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs on %s: %v", dir, err)
		}
		t.Skipf("mount a tmpfs on %s: %v (the disk-full tests need it)", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// smallDisk returns a new instance with a tmpfs of size bytes mounted on
// sub of its data directory (the data directory itself when empty), and
// a validator for its calls.
func smallDisk(t *testing.T, sub string, size int64) (*instance, *validator) {
	t.Helper()
	in := newInstance(t)
	smallFS(t, filepath.Join(in.data, sub), size)
	return in, newValidator(t)
}

// fill writes the file path until its file system has no byte left, and
// returns how much it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			m, err := f.Write(buf)
			n += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", path, err)
			}
		}
	}
	return n
}

// free returns the bytes free on the file system of dir.
func free(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// diskCall is one request of the disk-full tests, with its status and
// message.
func diskCall(t *testing.T, v *validator, p *proc, method, path, secret string, body any) (int, string) {
	t.Helper()
	var out struct {
		Message string `json:"message"`
	}
	code := raw(t, v, method, p.URL+path, secret, body, &out)
	return code, out.Message
}

// TestDiskFull: the file system of kmsd's data directory fills up. kmsd
// stays up: /healthz answers 503 saying why, every call (reads too, which
// write their audit record) answers 507, and a restart on the still-full
// disk comes up the same way. Once space returns, kmsd serves again
// without a restart, every hash acknowledged before decrypts, and the
// audit chain verifies.
func TestDiskFull(t *testing.T) {
	in, v := smallDisk(t, "", 64<<20)
	const reserve = "16MiB"
	p := in.start(t, "-disk-reserve", reserve)
	root := in.bootstrap

	if code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", root, map[string]any{"name": "pay"}); code != 200 {
		t.Fatalf("create ring = %d %s", code, msg)
	}
	type enc struct{ Hash, Header string }
	var acked []enc
	for range 20 {
		var e enc
		if code := raw(t, v, "POST", p.URL+"/ks/encrypt", root, map[string]any{"ringname": "pay"}, &e); code != 200 {
			t.Fatalf("encrypt = %d", code)
		}
		acked = append(acked, e)
	}
	if _, err := os.Stat(filepath.Join(in.data, "reserve")); err != nil {
		t.Errorf("kmsd holds no part of its reserve in %s/reserve: %v", in.data, err)
	}

	filler := filepath.Join(in.data, "filler")
	fill(t, filler)
	wantFull := func(when string) {
		t.Helper()
		code, msg := diskCall(t, v, p, "GET", "/healthz", "", nil)
		if code != http.StatusServiceUnavailable || !strings.Contains(msg, "disk is full") {
			t.Errorf("%s: GET /healthz = %d %q, want 503 saying the disk is full", when, code, msg)
		}
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/ks/encrypt", map[string]any{"ringname": "pay"}},
			{"POST", "/ks/decrypt", map[string]any{"hash": acked[0].Hash, "header": acked[0].Header}},
			{"POST", "/ks/keyrings", map[string]any{"name": "other"}},
			{"GET", "/ks/keyrings/pay", nil},
		} {
			code, msg := diskCall(t, v, p, c.method, c.path, root, c.body)
			if code != http.StatusInsufficientStorage || !strings.Contains(msg, "disk is full") {
				t.Errorf("%s: %s %s = %d %q, want 507 saying the disk is full", when, c.method, c.path, code, msg)
			}
		}
		select {
		case <-p.Exited:
			t.Fatalf("%s: kmsd exited: %v\n%s", when, p.Cmd.ProcessState, p.Stderr)
		default:
		}
	}
	wantFull("disk full")

	// A restart on the still-full disk (filled to the last byte again,
	// the ballast kmsd gave up included) comes up and answers the same.
	p.Stop(t)
	fill(t, filler)
	p = in.start(t, "-disk-reserve", reserve)
	wantFull("restarted on a full disk")

	// Space returns: kmsd serves again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// (kmsd opens its store within a second of there being room.)
	kmsdtest.WaitFor(t, 10*time.Second, "GET /healthz to answer 200 once space returned", func() bool {
		code, _ := diskCall(t, v, p, "GET", "/healthz", "", nil)
		return code == 200
	})
	if _, err := os.Stat(filepath.Join(in.data, "reserve")); err != nil {
		t.Errorf("kmsd did not take its reserve back once space returned: %v", err)
	}
	for i, e := range acked {
		if code, msg := diskCall(t, v, p, "POST", "/ks/decrypt", root, map[string]any{"hash": e.Hash, "header": e.Header}); code != 200 {
			t.Fatalf("decrypt of acknowledged hash %d after the disk was full = %d %s", i, code, msg)
		}
	}
	if code, _ := diskCall(t, v, p, "GET", "/ks/keyrings/other", root, nil); code != http.StatusNotFound {
		t.Errorf("GET the ring whose creation answered 507 = %d, want 404", code)
	}
	if code, msg := diskCall(t, v, p, "POST", "/ks/encrypt", root, map[string]any{"ringname": "pay"}); code != 200 {
		t.Errorf("encrypt once space returned = %d %s", code, msg)
	}
	p.Stop(t)
	in.verifyAudit(t)
}

// TestFirstStartOnFullDisk: kmsd's first start, on an empty data
// directory whose disk is full, serves 503 and 507 until there is room,
// then creates its store and bootstrap key and serves, without a restart.
func TestFirstStartOnFullDisk(t *testing.T) {
	in, v := smallDisk(t, "", 32<<20)
	filler := filepath.Join(in.data, "filler")
	fill(t, filler)
	p := in.start(t, "-disk-reserve", "8MiB")
	if code, msg := diskCall(t, v, p, "GET", "/healthz", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(msg, "disk is full") {
		t.Errorf("GET /healthz on a full disk before the first start = %d %q, want 503 saying the disk is full", code, msg)
	}
	if code, msg := diskCall(t, v, p, "GET", "/ks/keyrings", in.bootstrap, nil); code != http.StatusInsufficientStorage {
		t.Errorf("GET /ks/keyrings before the first start = %d %q, want 507", code, msg)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	kmsdtest.WaitFor(t, 10*time.Second, "GET /healthz to answer 200 once space returned", func() bool {
		code, _ := diskCall(t, v, p, "GET", "/healthz", "", nil)
		return code == 200
	})
	if code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", in.bootstrap, map[string]any{"name": "pay"}); code != 200 {
		t.Errorf("create ring with the bootstrap key once kmsd started = %d %s", code, msg)
	}
	p.Stop(t)
	in.verifyAudit(t)
}

// TestDiskFullUnderLoad: kmsd's own writes fill a small disk while
// clients keep encrypting with Assets. It stops at its reserve: it never
// dies, the answers turn to 507, and every answer of 200 stays true (its
// hash decrypts once space is back, and after a restart).
func TestDiskFullUnderLoad(t *testing.T) {
	in, v := smallDisk(t, "", 64<<20)
	p := in.start(t, "-disk-reserve", "16MiB")
	root := in.bootstrap
	if code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", root, map[string]any{"name": "pay"}); code != 200 {
		t.Fatalf("create ring = %d %s", code, msg)
	}
	// Leave about 8 MiB above the reserve for kmsd to fill.
	ballast := filepath.Join(in.data, "filler")
	fill(t, ballast)
	if err := os.Truncate(ballast, max(0, fileSize(t, ballast)-(24<<20))); err != nil {
		t.Fatal(err)
	}

	type enc struct{ Hash, Header string }
	var (
		mu    sync.Mutex
		acked []enc
		full  atomic.Int64
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	data := map[string]any{"blob": strings.Repeat("x", 8<<10)}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for full.Load() < 50 && time.Now().Before(deadline) {
				var e enc
				code := raw(t, v, "POST", p.URL+"/ks/encrypt", root, map[string]any{"ringname": "pay", "asset": map[string]any{"data": data}}, &e)
				switch code {
				case 200:
					mu.Lock()
					acked = append(acked, e)
					mu.Unlock()
				case http.StatusInsufficientStorage:
					full.Add(1)
				default:
					t.Errorf("encrypt on a filling disk = %d, want 200 or 507", code)
					return
				}
			}
		}()
	}
	wg.Wait()
	if full.Load() == 0 {
		t.Fatalf("no encrypt answered 507 before the deadline (%d answered 200): the disk did not fill", len(acked))
	}
	select {
	case <-p.Exited:
		t.Fatalf("kmsd exited while its disk filled: %v\n%s", p.Cmd.ProcessState, p.Stderr)
	default:
	}
	t.Logf("%d encrypt calls answered 200 before the disk reached the reserve", len(acked))
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	p.Stop(t)
	p = in.start(t, "-disk-reserve", "16MiB")
	for i, e := range acked {
		if code, msg := diskCall(t, v, p, "POST", "/ks/decrypt", root, map[string]any{"hash": e.Hash, "header": e.Header}); code != 200 {
			t.Fatalf("decrypt of acknowledged hash %d = %d %s", i, code, msg)
		}
	}
	p.Stop(t)
	in.verifyAudit(t)
}

// TestTrailDiskFull: only the file system of the activity trail fills up.
// An operation that changes the store (a ring's creation) answers 507,
// and then nothing of it exists, during the fault, once space returns
// (without a restart) and after a restart; kmsd serves again without one.
// With the reserve on, the refusal comes before anything is written; with
// it off, it comes from the trail's write, after the store committed, and
// the store's writes are undone.
func TestTrailDiskFull(t *testing.T) {
	for _, reserve := range []string{"4MiB", "0"} {
		t.Run("reserve "+reserve, func(t *testing.T) {
			in, v := smallDisk(t, "trail", 16<<20)
			trail := filepath.Join(in.data, "trail")
			p := in.start(t, "-disk-reserve", reserve)
			root := in.bootstrap
			if code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", root, map[string]any{"name": "pay"}); code != 200 {
				t.Fatalf("create ring = %d %s", code, msg)
			}
			filler := filepath.Join(trail, "filler")
			fill(t, filler)
			// The trail keeps zeros written ahead of its last record; the
			// appends use those up before one meets the full disk. Large
			// records (a validation with 12 KiB of props) get there soon,
			// smaller ones then use what is left, down to a record smaller
			// than a ring creation's.
			deadline := time.Now().Add(60 * time.Second)
			for _, pad := range []int{12 << 10, 1 << 10, 0} {
				validate := map[string]any{"key": root, "activity": map[string]any{"action": "decrypt", "ringname": "pay",
					"props": map[string]any{"pad": strings.Repeat("p", pad)}}}
				for {
					code, msg := diskCall(t, v, p, "POST", "/auth/validate", root, validate)
					if code == http.StatusInsufficientStorage {
						break
					}
					if code != 200 || time.Now().After(deadline) {
						t.Fatalf("validate while the trail's disk fills = %d %s, want 200 until 507", code, msg)
					}
				}
			}
			code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", root, map[string]any{"name": "lost"})
			if code != http.StatusInsufficientStorage {
				t.Fatalf("create ring with the trail's disk full = %d %s, want 507", code, msg)
			}
			if code, msg := diskCall(t, v, p, "GET", "/healthz", "", nil); reserve != "0" && code != http.StatusServiceUnavailable {
				t.Errorf("GET /healthz with the trail's disk full = %d %s, want 503", code, msg)
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if code, msg := diskCall(t, v, p, "GET", "/healthz", "", nil); code != 200 {
				t.Errorf("GET /healthz once space returned = %d %s, want 200", code, msg)
			}
			if code, msg := diskCall(t, v, p, "GET", "/ks/keyrings/lost", root, nil); code != http.StatusNotFound {
				t.Errorf("GET the ring whose creation answered 507 = %d %s, want 404", code, msg)
			}
			if code, msg := diskCall(t, v, p, "POST", "/ks/keyrings", root, map[string]any{"name": "later"}); code != 200 {
				t.Errorf("create ring once space returned = %d %s, want 200 without a restart", code, msg)
			}
			p.Stop(t)
			p = in.start(t, "-disk-reserve", reserve)
			if code, msg := diskCall(t, v, p, "GET", "/ks/keyrings/lost", root, nil); code != http.StatusNotFound {
				t.Errorf("after a restart, GET the ring whose creation answered 507 = %d %s, want 404", code, msg)
			}
			if code, msg := diskCall(t, v, p, "GET", "/ks/keyrings/later", root, nil); code != 200 {
				t.Errorf("after a restart, GET the ring created once space returned = %d %s, want 200", code, msg)
			}
			p.Stop(t)
			in.verifyAudit(t)
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
