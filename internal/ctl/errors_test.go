package ctl

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every error agentctl prints is one line in one format: "agentctl: ", the
// status code in words where it says something the message does not, and
// the message without gRPC's framing.
func TestPrintError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"permission denied", status.Error(codes.PermissionDenied, "token t is a member token; this needs an admin token"),
			"agentctl: permission denied: token t is a member token; this needs an admin token\n"},
		{"unauthenticated", status.Error(codes.Unauthenticated, "unknown API token"),
			"agentctl: unauthenticated: unknown API token\n"},
		{"deadline exceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			"agentctl: context deadline exceeded\n"}, // the message says it
		{"resource exhausted", status.Error(codes.ResourceExhausted, "too many sessions"),
			"agentctl: resource exhausted: too many sessions\n"},
		{"unimplemented", status.Error(codes.Unimplemented, "unknown service agentd.v1.FooService"),
			"agentctl: unimplemented: unknown service agentd.v1.FooService\n"},
		{"offline", status.Error(codes.Unavailable, "machine m-1 is offline (last seen never)"),
			"agentctl: unavailable: machine m-1 is offline (last seen never)\n"},
		{"dial failed", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`),
			"agentctl: unavailable: dial tcp 127.0.0.1:1: connect: connection refused\n"},
		{"message says it", status.Error(codes.PermissionDenied, "permission denied: /etc/shadow (agentd runs as user me)"),
			"agentctl: permission denied: /etc/shadow (agentd runs as user me)\n"},
		{"not found", status.Error(codes.NotFound, "/x does not exist; use Write to create it"),
			"agentctl: /x does not exist; use Write to create it\n"},
		{"failed precondition", status.Error(codes.FailedPrecondition, "environment py is validating: wait for it"),
			"agentctl: environment py is validating: wait for it\n"},
		{"unknown", status.Error(codes.Unknown, "something broke"), "agentctl: something broke\n"},
		{"no message", status.Error(codes.Internal, ""), "agentctl: internal\n"},
		{"wrapped", fmt.Errorf("list machines: %w", status.Error(codes.PermissionDenied, "not yours")),
			"agentctl: list machines: permission denied: not yours\n"},
		{"plain", errors.New("--token-file: open /t: no such file or directory"),
			"agentctl: --token-file: open /t: no such file or directory\n"},
		{"exit error", &exitError{code: ExitError, err: status.Error(codes.PermissionDenied, "no")},
			"agentctl: permission denied: no\n"},
		{"usage", usagef("--from must not be negative"),
			"agentctl: --from must not be negative\nRun 'agentctl --help' for usage.\n"},
		{"cobra usage", errors.New(`unknown flag: --nope`),
			"agentctl: unknown flag: --nope\nRun 'agentctl --help' for usage.\n"},
		{"exit code only", &exitError{code: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			printError(&b, tc.err)
			if got := b.String(); got != tc.want {
				t.Errorf("printed %q\n     want %q", got, tc.want)
			}
		})
	}
}
