package fleet

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/transport"
)

// frame is a message the proxy forwards without decoding it: the buffers
// gRPC received it in, passed on to the send side as they are.
type frame struct{ data mem.BufferSlice }

// free releases the frame's buffers if no send took them.
func (f *frame) free() {
	if f.data != nil {
		f.data.Free()
		f.data = nil
	}
}

// rawCodec passes frames through as buffers, without a copy, and everything
// else (the hub's own services) through protobuf, so one server can serve
// both. It takes the name "proto" so that ordinary clients' content type
// matches.
type rawCodec struct{}

var (
	_          encoding.CodecV2 = rawCodec{}
	protoCodec                  = encoding.GetCodecV2(protoenc.Name)
)

// Marshal hands a frame's buffers to gRPC, which frees them once sent.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		data := f.data
		f.data = nil
		return data, nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal keeps a reference to the received buffers: gRPC frees its own
// after Unmarshal returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.free()
		data.Ref()
		f.data = data
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}

func (rawCodec) Name() string { return protoenc.Name }

// Codec is the codec of a server whose unknown calls Proxy forwards
// (grpc.ForceServerCodecV2(fleet.Codec())): it passes the proxy's frames
// through as they are and everything else through protobuf.
func Codec() encoding.CodecV2 { return rawCodec{} }

// Route is where a call goes: the machine's connection and the metadata to
// send along (who asked, which conversation).
type Route struct {
	Conn grpc.ClientConnInterface
	MD   metadata.MD
	// Done, if set, is called when the call has ended, with how it ended;
	// what it returns is what the caller gets (it may say more).
	Done func(error) error
	// Rec, if set, is the hub's record of the call: it reads the frames it
	// needs as they pass and is finished with how the call ended.
	Rec CallRecorder
	// Answer, if set, is asked when the machine ended the call with an
	// error (after Done) before it sent the caller anything: it returns
	// the frames to send the caller instead (the call then ends OK), or
	// nil and the error the caller gets. req is the caller's first frame
	// (nil: none came).
	Answer func(req []byte, err error) ([][]byte, error)
	// Edit, if set, rewrites each frame the machine sends before the
	// caller gets it.
	Edit func(frame []byte) []byte
	// Streams, if set, carries a PortService.Connect call whose caller
	// asks for it (ConnectRequest.stream) on byte streams: the caller's
	// to this hub, and the daemon's too when StreamMachine is set.
	Streams *transport.Streams
	// StreamMachine is the machine whose daemon is offered a byte stream
	// (its tunnel is here and it dials the hub's public port); "": none.
	StreamMachine string
}

// CallRecorder records a call the proxy forwards. Up and Down see each
// frame as it passes (the caller's and the machine's), without keeping
// it: the buffers are the proxy's, freed once sent. Finish is called
// once, with what the caller gets.
type CallRecorder interface {
	Up(data mem.BufferSlice)
	Down(data mem.BufferSlice)
	Finish(err error)
}

// Router authenticates and authorises a call to method and finds its
// machine; its errors are returned to the caller as they are (domain
// errors, which the server's interceptor makes status errors, or status
// errors).
type Router func(ctx context.Context, method string) (Route, error)

// Proxy returns a grpc.StreamHandler, for grpc.UnknownServiceHandler,
// that forwards every agentd.v1 call to the machine the router names,
// without decoding it: unary and streaming calls alike, headers and
// trailers included. The server must use Codec.
func Proxy(route Router) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		method, ok := grpc.MethodFromServerStream(ss)
		if !ok {
			return errs.New(errs.Unknown, "no method in stream")
		}
		if !strings.HasPrefix(method, "/agentd.v1.") {
			return errs.New(errs.Unimplemented, "unknown method %s", method)
		}
		r, err := route(ss.Context(), method)
		if err != nil {
			return err
		}
		// Done and Rec see the status the caller gets (forward's own
		// errors are domain errors).
		var fw forwarded
		if method == connectMethod && r.Streams != nil {
			err = forwardConnect(ss, r, method, &fw)
		} else {
			err = forward(ss, r, method, nil, &fw)
		}
		err = rpcerr.Status(err)
		if r.Done != nil {
			err = r.Done(err)
		}
		if r.Answer != nil && err != nil && fw.sent == 0 {
			err = answer(ss, r, fw.request(), err)
		}
		if r.Rec != nil {
			r.Rec.Finish(err)
		}
		return err
	}
}

var streamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// forwarded is what forward tells Proxy of a call: how many frames the
// caller got, and (with Route.Answer) the caller's first frame.
type forwarded struct {
	sent int
	mu   sync.Mutex // the caller's frames are read on the upload goroutine
	req  []byte
	seen bool
}

func (fw *forwarded) keep(data mem.BufferSlice) {
	fw.mu.Lock()
	if !fw.seen {
		fw.seen, fw.req = true, data.Materialize()
	}
	fw.mu.Unlock()
}

func (fw *forwarded) request() []byte {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.req
}

// answer sends the caller what Route.Answer says instead of err.
func answer(ss grpc.ServerStream, r Route, req []byte, err error) error {
	frames, err := r.Answer(req, err)
	if frames == nil {
		return err
	}
	for _, b := range frames {
		data := mem.BufferSlice{mem.SliceBuffer(b)}
		if r.Rec != nil {
			r.Rec.Down(data)
		}
		if err := ss.SendMsg(&frame{data: data}); err != nil {
			return err
		}
	}
	return nil
}

// forward relays the call's frames both ways; first, if set, is the
// caller's first frame, already read.
func forward(ss grpc.ServerStream, r Route, method string, first *frame, fw *forwarded) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	ctx = metadata.NewOutgoingContext(ctx, r.MD)
	cs, err := r.Conn.NewStream(ctx, streamDesc, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		if first != nil {
			first.free()
		}
		return err
	}

	// Caller -> machine, until the caller half-closes or fails.
	upErr := make(chan error, 1)
	go func() {
		f := &frame{}
		if first != nil {
			f = first
		}
		for {
			if first != nil {
				first = nil // already read
			} else if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					upErr <- cs.CloseSend()
				} else {
					upErr <- err
				}
				return
			}
			if r.Rec != nil {
				r.Rec.Up(f.data)
			}
			if r.Answer != nil {
				fw.keep(f.data)
			}
			err := cs.SendMsg(f)
			f.free()
			if err != nil {
				// The machine's side ended; its status arrives through RecvMsg.
				upErr <- nil
				return
			}
		}
	}()

	// Machine -> caller, until the machine ends the call.
	f := &frame{}
	headerSent := false
	for {
		err := cs.RecvMsg(f)
		if !headerSent {
			if md, herr := cs.Header(); herr == nil && len(md) > 0 {
				_ = ss.SendHeader(md)
			}
			headerSent = true
		}
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if ss.Context().Err() != nil {
				return status.FromContextError(ss.Context().Err()).Err()
			}
			return err
		}
		if r.Edit != nil {
			b := r.Edit(f.data.Materialize())
			f.free()
			f.data = mem.BufferSlice{mem.SliceBuffer(b)}
		}
		if r.Rec != nil {
			r.Rec.Down(f.data)
		}
		err = ss.SendMsg(f)
		f.free()
		fw.sent++
		if err != nil {
			return err
		}
		select {
		case err := <-upErr:
			if err != nil {
				cancel()
				return errs.New(errs.Canceled, "caller stream failed: %v", err)
			}
			upErr = nil // done sending; keep relaying the machine's answers
		default:
		}
	}
}
