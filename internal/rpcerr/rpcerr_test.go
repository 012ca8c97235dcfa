package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// TestStatus maps every kind of domain error the handlers return; Code
// and Message agree with it.
func TestStatus(t *testing.T) {
	t.Parallel()
	pathErr := &fs.PathError{Op: "open", Path: "/x/y", Err: syscall.ENOENT}
	tests := []struct {
		name     string
		err      error
		wantCode codes.Code
		wantMsg  string
	}{
		{"invalid", errs.New(errs.Invalid, "depth -1 is negative"), codes.InvalidArgument, "depth -1 is negative"},
		{"unauthenticated", errs.New(errs.Unauthenticated, "token revoked"), codes.Unauthenticated, "token revoked"},
		{"not found", errs.New(errs.NotFound, "no process p-9"), codes.NotFound, "no process p-9"},
		{"exists", errs.New(errs.Exists, "a.txt exists"), codes.AlreadyExists, "a.txt exists"},
		{"precondition", errs.New(errs.Precondition, "old_string occurs 3 times (lines 4, 19, 40); add context or set replace_all"),
			codes.FailedPrecondition, "old_string occurs 3 times (lines 4, 19, 40); add context or set replace_all"},
		{"permission", errs.New(errs.Permission, "no"), codes.PermissionDenied, "no"},
		{"exhausted", errs.New(errs.Exhausted, "too large"), codes.ResourceExhausted, "too large"},
		{"unavailable", errs.New(errs.Unavailable, "later"), codes.Unavailable, "later"},
		{"canceled kind", errs.New(errs.Canceled, "stopped"), codes.Canceled, "stopped"},
		{"timeout kind", errs.New(errs.Timeout, "too slow"), codes.DeadlineExceeded, "too slow"},
		{"wrapped kind keeps the cause", errs.Wrap(errs.Invalid, errors.New("EOF"), "reading the archive"),
			codes.InvalidArgument, "reading the archive: EOF"},
		{"kind under fmt wrap", fmt.Errorf("restore: %w", errs.New(errs.NotFound, "no snapshot s-1")),
			codes.NotFound, "restore: no snapshot s-1"},
		{"os not exist", pathErr, codes.NotFound, "open /x/y: no such file or directory"},
		{"os permission", &fs.PathError{Op: "open", Path: "/r", Err: syscall.EACCES}, codes.PermissionDenied, "open /r: permission denied"},
		{"disk full", &fs.PathError{Op: "write", Path: "/f", Err: syscall.ENOSPC}, codes.ResourceExhausted, "write /f: no space left on device"},
		{"not a dir", &fs.PathError{Op: "open", Path: "/f/g", Err: syscall.ENOTDIR}, codes.FailedPrecondition, "open /f/g: not a directory"},
		{"exists os", os.ErrExist, codes.AlreadyExists, "file already exists"},
		{"context canceled", context.Canceled, codes.Canceled, "context canceled"},
		{"context deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
		{"unknown is internal", errors.New("pack index checksum mismatch"), codes.Internal, "pack index checksum mismatch"},
		{"status passes", status.Error(codes.Unauthenticated, "missing token"), codes.Unauthenticated, "missing token"},
		{"status wrapped by a kind keeps its code", errs.Wrap(errs.Invalid, status.Error(codes.Canceled, "client gone"), "import refused"),
			codes.Canceled, "import refused: rpc error: code = Canceled desc = client gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, ok := status.FromError(Status(tt.err))
			if !ok {
				t.Fatalf("Status(%v) is no status", tt.err)
			}
			got := [2]string{st.Code().String(), st.Message()}
			if c := Code(tt.err); c != tt.wantCode {
				t.Errorf("Code(%v) = %v, want %v", tt.err, c, tt.wantCode)
			}
			if m := Message(Status(tt.err)); m != tt.wantMsg {
				t.Errorf("Message(Status(%v)) = %q, want %q", tt.err, m, tt.wantMsg)
			}
			want := [2]string{tt.wantCode.String(), tt.wantMsg}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Status(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
	if Status(nil) != nil || Code(nil) != codes.OK {
		t.Error("Status(nil) is not nil, or Code(nil) not OK")
	}
}

// TestStatusInterceptors checks that both interceptors map a handler's
// domain error and leave success alone.
func TestStatusInterceptors(t *testing.T) {
	t.Parallel()
	domain := errs.New(errs.NotFound, "no process p-1")
	resp, err := Unary(t.Context(), "req", &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		return "ignored", domain
	})
	if resp != nil || status.Code(err) != codes.NotFound || status.Convert(err).Message() != "no process p-1" {
		t.Errorf("unary: got %v, %v; want nil, NotFound 'no process p-1'", resp, err)
	}
	resp, err = Unary(t.Context(), "req", &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		return "ok", nil
	})
	if resp != "ok" || err != nil {
		t.Errorf("unary success: got %v, %v", resp, err)
	}
	err = Stream(nil, nil, &grpc.StreamServerInfo{}, func(any, grpc.ServerStream) error { return errs.New(errs.Invalid, "bad %s", "field") })
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "bad field" {
		t.Errorf("stream: got %v, want InvalidArgument 'bad field'", err)
	}
	if err := Stream(nil, nil, &grpc.StreamServerInfo{}, func(any, grpc.ServerStream) error { return nil }); err != nil {
		t.Errorf("stream success: got %v", err)
	}
}
