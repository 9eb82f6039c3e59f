package sigv4

import (
	"net/http"
	"testing"
)

// FuzzParse: whatever the Authorization and X-Amz-Date headers and the
// query hold, Parse and Verify answer without panicking, and anything that
// fails is an *Error.
func FuzzParse(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "+
		"Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", "20150830T123600Z", "")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e/aws4_request,SignedHeaders=host;x-amz-date;x,Signature=", "20150830T123600Z", "a=%zz&&b")
	f.Add("AWS4-HMAC-SHA256 Credential=///service/aws4_request, SignedHeaders=;, Signature=00", "20151330T250000Z", "%E1%88%B4=1")
	f.Add("Bearer x", "", "")
	f.Add("AWS4-HMAC-SHA256 ,,,=,Credential==", "2015", "+&=")
	f.Fuzz(func(t *testing.T, authorization, date, query string) {
		r, err := http.NewRequest("POST", "http://example.amazonaws.com/", nil)
		if err != nil {
			t.Skip()
		}
		r.URL.RawQuery = query
		r.Header.Set("Authorization", authorization)
		r.Header.Set("X-Amz-Date", date)
		q, err := Parse(r, "service", exampleTime)
		if err == nil {
			err = q.Verify([]byte("body"), []byte(exampleSecret))
		}
		if _, ok := err.(*Error); err != nil && !ok {
			t.Fatalf("Parse and Verify = %T %v, want an *Error", err, err)
		}
	})
}
