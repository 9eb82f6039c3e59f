//go:build cgo

package hsm

import (
	"errors"
	"testing"

	"github.com/miekg/pkcs11"
	"github.com/ringkms/kms/internal/hsmtest"
)

// TestClassifyLogin covers the answers to C_Login that SoftHSM2 never
// gives (it does not lock a PIN).
func TestClassifyLogin(t *testing.T) {
	for _, tc := range []struct {
		code pkcs11.Error
		want Reason
	}{
		{pkcs11.CKR_PIN_INCORRECT, ReasonPINIncorrect},
		{pkcs11.CKR_PIN_INVALID, ReasonPINIncorrect},
		{pkcs11.CKR_PIN_LEN_RANGE, ReasonPINIncorrect},
		{pkcs11.CKR_PIN_LOCKED, ReasonPINLocked},
		{pkcs11.CKR_PIN_EXPIRED, ReasonPINLocked},
		{pkcs11.CKR_USER_PIN_NOT_INITIALIZED, ReasonPINLocked},
		{pkcs11.CKR_DEVICE_ERROR, ReasonDevice},
	} {
		err := loginError(tc.code, "kms", nil, 0)
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.want || !errors.Is(err, tc.code) {
			t.Errorf("loginError(%v) = %v, want reason %v wrapping the code", tc.code, err, tc.want)
		}
	}
}

// TestSessionReplaced: a session the token dropped fails one operation,
// and is replaced rather than handed out again.
func TestSessionReplaced(t *testing.T) {
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	u, err := ParseURI(tok.URI("kms-master"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Open(u, tok.PIN)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer tk.Close()
	k, err := tk.AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() = %v", err)
	}
	dead := <-tk.pool
	if err := tk.mod.ctx.CloseSession(dead); err != nil {
		t.Fatal(err)
	}
	tk.pool <- dead
	failed := 0
	for i := range 2 * tk.n {
		_, err := k.Seal([]byte("x"), nil)
		if err != nil {
			failed++
			if !errors.Is(err, pkcs11.Error(pkcs11.CKR_SESSION_HANDLE_INVALID)) {
				t.Errorf("Seal() %d = %v, want CKR_SESSION_HANDLE_INVALID", i, err)
			}
		}
	}
	// The pool hands sessions out in turn: the dead one comes up once
	// within the first n seals, and never again.
	if failed != 1 {
		t.Errorf("%d of %d seals failed after one session was dropped, want 1", failed, 2*tk.n)
	}
}
