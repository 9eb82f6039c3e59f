package keytype_test

import (
	"encoding/hex"
	"fmt"

	"github.com/ringkms/kms/internal/keytype"
)

// A held key's life: a checked Spec, material to seal and store, and a
// Key loaded from it for the operations of its type.
func Example() {
	spec, err := keytype.NewSpec(keytype.ChaCha20Poly1305, keytype.Params{})
	if err != nil {
		panic(err)
	}
	material, _ := keytype.Generate(spec) // the caller seals and stores it
	k, err := keytype.Load(spec, material)
	if err != nil {
		panic(err)
	}
	ct, _ := k.Encrypt([]byte("attack at dawn"), []byte("orders"))
	plain, _ := k.Decrypt(ct, []byte("orders"))
	fmt.Printf("%d bytes: %s\n", len(ct), plain)
	_, err = k.Decrypt(ct, []byte("other orders"))
	fmt.Println(err)
	_, err = k.Sign([]byte("attack at dawn"), keytype.SignOptions{})
	fmt.Println(err)
	// Output:
	// 42 bytes: attack at dawn
	// keytype: malformed input: cipher: message authentication failed
	// keytype: operation not supported by the key type: chacha20-poly1305 keys do not sign; the key types that do are ed25519, ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096, ml-dsa
}

// An hmac key's HMAC is HMAC under the key itself.
func ExampleKey_HMAC() {
	spec, _ := keytype.NewSpec(keytype.HMAC, keytype.Params{KeySize: 32})
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	k, _ := keytype.Load(spec, key)
	mac, _ := k.HMAC(keytype.SHA2_256, []byte("attack at dawn"))
	fmt.Println(hex.EncodeToString(mac))
	// Output: aa7db19834da4fb80ac200251b5fedf449462c3fffe48a5d5f3e916546ba8d27
}

func ExampleParse() {
	_, err := keytype.Parse("aes128-gcm96")
	fmt.Println(err)
	// Output: keytype: invalid parameter: unknown key type "aes128-gcm96"; the key types are aes256-gcm96, chacha20-poly1305, hmac, ed25519, ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096, ml-dsa
}
