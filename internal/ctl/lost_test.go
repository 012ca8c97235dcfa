package ctl

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestConnectionLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		// nginx resets the stream when its upstream dies mid-response.
		{status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"), true},
		{status.Error(codes.Internal, "the daemon failed"), false},
		{status.Error(codes.NotFound, "no process p-1"), false},
		{status.Error(codes.Canceled, "context canceled"), false},
		{io.EOF, false},
		{errors.New("stream terminated by RST_STREAM with error code: INTERNAL_ERROR"), false},
	} {
		if got := connectionLost(tc.err); got != tc.want {
			t.Errorf("connectionLost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
