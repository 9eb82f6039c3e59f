package main

import (
	"strings"

	"github.com/ringkms/kms"
)

// The service's errors speak of the members of its requests ("pass
// \"rotate\": true", "after must be..."); a kmsctl user gave flags. A
// command whose flags the service knows by other names rewrites the
// errors of its call with inFlags, so that what the user reads names
// what the user can type.

// inFlags returns err with the service's words for the members of a
// request replaced by kmsctl's, in its message and in its Fields (a key
// equal to the service's words of a pair is replaced, as is the text).
// pairs are the service's words and kmsctl's, in turn, as for
// strings.NewReplacer. An error that is not the service's passes as it
// is. The words are the service's messages: a test of each command that
// uses them runs against the service, so that a change of its wording
// shows.
func inFlags(err error, pairs ...string) error {
	e, ok := err.(*kms.Error)
	if !ok || e == nil {
		return err
	}
	r := strings.NewReplacer(pairs...)
	out := *e
	out.Message = r.Replace(e.Message)
	if e.Fields != nil {
		out.Fields = make(map[string]string, len(e.Fields))
		for k, v := range e.Fields {
			for i := 0; i+1 < len(pairs); i += 2 {
				if k == pairs[i] {
					k = pairs[i+1]
					break
				}
			}
			out.Fields[k] = r.Replace(v)
		}
	}
	return &out
}

// Words of the service and kmsctl's, for inFlags.
var (
	// rotateWords: a key state change or destruction of the ring's
	// active key, without -rotate.
	rotateWords = []string{`pass "rotate": true`, "give -rotate"}
	// destroyWords: key destroy's -after, too short for the service.
	destroyWords = []string{`pass "rotate": true`, "give -rotate", "after must be", "-after must be"}
	// inviteWords: the members of user invite's flags whose names differ.
	inviteWords = []string{"firstName", "-first-name", "lastName", "-last-name", "displayName", "-display-name"}
)
