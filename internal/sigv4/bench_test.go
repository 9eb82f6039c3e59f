package sigv4

import "testing"

// BenchmarkSigningKey is the derivation that a cache of signing keys
// would save: four HMAC-SHA256s.
func BenchmarkSigningKey(b *testing.B) {
	secret := []byte(exampleSecret)
	scope := Scope{Date: "20150830", Region: "us-east-1", Service: "kms"}
	for b.Loop() {
		signingKey(secret, scope)
	}
}

// BenchmarkVerify is Parse and Verify of a KMS request with a small body.
func BenchmarkVerify(b *testing.B) {
	body := []byte(`{"KeyId":"alias/app","Plaintext":"aGVsbG8="}`)
	req := newRequest(b, "POST", "https://kms.us-east-1.amazonaws.com/", body)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "TrentService.Encrypt")
	if err := Sign(req, body, exampleKeyID, exampleSecret, "us-east-1", "kms", exampleTime); err != nil {
		b.Fatal(err)
	}
	r := received(b, req)
	secret := []byte(exampleSecret)
	for b.Loop() {
		q, err := Parse(r, "kms", exampleTime)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Verify(body, secret); err != nil {
			b.Fatal(err)
		}
	}
}
