package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// jsonLines parses activity records, one per line.
func jsonLines(t *testing.T, text string) []kms.Activity {
	t.Helper()
	var out []kms.Activity
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a kms.Activity
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, a)
	}
	return out
}

// TestAuditSinkAndExport: with -audit-sink file:PATH, every record
// committed while kmsd runs reaches the file, in order, without a gap;
// kmsd audit export gives the same records, from the running kmsd and
// from the stopped one's store, from any seq.
func TestAuditSinkAndExport(t *testing.T) {
	in := newInstance(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	p, root := in.serve(t, newValidator(t), "-audit-sink", "file:"+path)
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "siem"}))
	for range 30 {
		must[*kms.EncryptResult](t, "Encrypt")(root.Encrypt(bg, kms.EncryptInput{RingName: "siem"}))
	}
	online := jsonLines(t, in.kmsdCmd(t, "audit", "export", "-data", in.data, "-from", "1", "-log-level", "error"))
	if len(online) < 31 {
		t.Fatalf("audit export from the running kmsd: %d records, want 31 or more", len(online))
	}
	p.Stop(t) // the sink delivers what was committed before it stops

	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sunk := jsonLines(t, string(text))
	offline := jsonLines(t, in.kmsdCmd(t, "audit", "export", "-data", in.data, "-log-level", "error"))
	if len(sunk) == 0 || len(offline) < len(online) {
		t.Fatalf("sink %d records, export %d", len(sunk), len(offline))
	}
	first := sunk[0].Seq
	for i, a := range sunk {
		if a.Seq != first+uint64(i) {
			t.Fatalf("sink record %d has seq %d, want %d", i, a.Seq, first+uint64(i))
		}
		if o := offline[a.Seq-1]; o.Digest != a.Digest || o.Action != a.Action {
			t.Fatalf("sink record seq %d differs from the trail's: %+v, %+v", a.Seq, a, o)
		}
	}
	if last := sunk[len(sunk)-1].Seq; last != uint64(len(offline)) {
		t.Fatalf("the sink ends at seq %d, the trail at %d", last, len(offline))
	}
	encrypts := 0
	for _, a := range sunk {
		if a.Action == "encrypt" {
			encrypts++
		}
	}
	if encrypts != 30 {
		t.Fatalf("the sink has %d encrypt records, want 30", encrypts)
	}
	tail := jsonLines(t, in.kmsdCmd(t, "audit", "export", "-data", in.data, "-from", "10", "-log-level", "error"))
	if len(tail) != len(offline)-9 || tail[0].Seq != 10 {
		t.Fatalf("audit export -from 10: %d records from %d", len(tail), tail[0].Seq)
	}
}
