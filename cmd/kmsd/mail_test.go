package main

import (
	"strings"
	"testing"
)

// TestRunWithoutMail: with no mailer, an invitation succeeds and answers
// its link (loginUrl), and a password reset cannot start; what kmsd logs
// at start says exactly that, and not that invitations fail.
func TestRunWithoutMail(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "no-mail-bootstrap-secret-0123456789abcdef"}
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	boot := e["KMS_BOOTSTRAP_API_KEY"]

	code, inv := call(t, nil, "POST", s.url+"/auth/user/invite", boot, map[string]any{
		"username": "ada", "email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace", "flags": map[string]bool{}})
	link, _ := inv["loginUrl"].(string)
	if code != 200 || !strings.Contains(link, "/auth/user/invite-validate?token=") {
		t.Fatalf("invite without mail = %d %v, want 200 with a loginUrl", code, inv)
	}
	if code, body := call(t, nil, "POST", s.url+"/auth/basic/reset-password-start", "", map[string]any{"email": "ada@example.com"}); code == 200 {
		t.Errorf("password reset without mail = %d %v, want a refusal", code, body)
	}

	logs := s.stderr.String()
	if !strings.Contains(logs, "mail: none configured") {
		t.Fatalf("no start-up message about mail in the log:\n%s", logs)
	}
	if strings.Contains(logs, "invitations and password resets will fail") || !strings.Contains(logs, "invitations still work") ||
		!strings.Contains(logs, "password resets cannot start") {
		t.Errorf("the start-up message about mail says:\n%s\nwant invitations working and password resets not starting", logs)
	}
}
