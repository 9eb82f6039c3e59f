package sigv4_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ringkms/kms/internal/sigv4"
)

// Sign reproduces AWS's worked example of Signature Version 4.
func ExampleSign() {
	req, _ := http.NewRequest("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	at := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	if err := sigv4.Sign(req, nil, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "iam", at); err != nil {
		panic(err)
	}
	fmt.Println(req.Header.Get("X-Amz-Date"))
	fmt.Println(req.Header.Get("Authorization"))
	// Output:
	// 20150830T123600Z
	// AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7
}

// A server parses the signature, looks up the secret of the access key ID
// it names, reads the body under a cap and verifies.
func ExampleParse() {
	secrets := map[string]string{"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := sigv4.Parse(r, "kms", now)
		if err == nil {
			secret, ok := secrets[q.AccessKeyID]
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if !ok {
				http.Error(w, "UnrecognizedClientException", http.StatusBadRequest)
				return
			}
			err = q.Verify(body, []byte(secret))
		}
		var e *sigv4.Error
		if errors.As(err, &e) {
			http.Error(w, string(e.Kind)+": "+e.Message, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s in %s", q.AccessKeyID, q.Scope.Region)
	}))
	defer srv.Close()

	for _, secret := range []string{"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "a wrong one"} {
		body := []byte(`{"KeyId":"alias/app","Plaintext":"aGVsbG8="}`)
		req, _ := http.NewRequest("POST", srv.URL+"/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "TrentService.Encrypt")
		if err := sigv4.Sign(req, body, "AKIDEXAMPLE", secret, "eu-west-1", "kms", now.Add(time.Minute)); err != nil {
			panic(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s", answer)
		fmt.Println()
	}
	// Output:
	// AKIDEXAMPLE in eu-west-1
	// InvalidSignatureException: The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.
}
