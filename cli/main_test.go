package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"citizen/services"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := Main(context.Background(), args, services.Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }})
	return rc, out.String(), errb.String()
}

func TestKeysCommands(t *testing.T) {
	dir := t.TempDir()
	rc, secret, _ := run(t, "keys", "create", "--tenant", "acme", "--user", "ana", "--rpm", "60", "--data-dir", dir)
	if rc != 0 || !strings.HasPrefix(secret, "sk-") {
		t.Fatalf("create: rc %d %q", rc, secret)
	}
	rc, list, _ := run(t, "keys", "list", "--data-dir", dir)
	if rc != 0 || !strings.Contains(list, "acme") || !strings.Contains(list, "active") || strings.Contains(list, strings.TrimSpace(secret)) {
		t.Fatalf("list (must never show the secret): %d\n%s", rc, list)
	}
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	if rc, _, e := run(t, "keys", "revoke", "--data-dir", dir, id); rc != 0 {
		t.Fatalf("revoke: %d %s", rc, e)
	}
	_, list, _ = run(t, "keys", "list", "--data-dir", dir)
	if !strings.Contains(list, "revoked") {
		t.Fatalf("not revoked:\n%s", list)
	}
	if rc, _, _ := run(t, "keys", "create", "--data-dir", dir); rc == 0 {
		t.Fatal("a key without a tenant was created")
	}
	if rc, _, _ := run(t, "keys", "revoke", "--data-dir", dir, "key_nope"); rc == 0 {
		t.Fatal("revoking an unknown key succeeded")
	}
}

func TestUnknownCommandAndVersion(t *testing.T) {
	if rc, _, _ := run(t, "frobnicate"); rc != 2 {
		t.Fatalf("unknown command rc %d", rc)
	}
	if rc, out, _ := run(t, "version"); rc != 0 || !strings.HasPrefix(out, "citizen ") {
		t.Fatalf("version: %d %q", rc, out)
	}
	if rc, out, _ := run(t, "config", "print", "--gateway.listen", "127.0.0.1:9"); rc != 0 || !strings.Contains(out, "127.0.0.1:9") {
		t.Fatalf("config print: %d %s", rc, out)
	}
}

// The configuration reference the command prints is services.Reference.
func TestConfigPrintMarkdown(t *testing.T) {
	rc, out, errs := run(t, "config", "print", "--markdown")
	if rc != 0 {
		t.Fatalf("config print --markdown: %d %s", rc, errs)
	}
	if out != services.Reference() {
		t.Fatal("config print --markdown is not services.Reference()")
	}
}
