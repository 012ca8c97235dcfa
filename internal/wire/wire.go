// Package wire is the one home of what crosses the wire between agentd,
// the hub and agentctl outside the protobuf definitions: the size of a
// streamed chunk (process output, file reads and writes, snapshot exports,
// Python output), the gRPC metadata keys, the JSON of pairing, the
// activity record kinds the hub acts on, and the exit code clients report
// for a process that ended.
package wire

// ChunkSize is the payload of one streamed message. It is 32 KiB less a
// margin for the message's own framing (protobuf tags, the 5-byte gRPC
// header): a message that fits in 32 KiB is served from grpc-go's 32 KiB
// buffer tier, while one a few bytes larger takes a 1 MiB buffer that is
// zeroed on every use, the largest single cost of bulk streams.
const ChunkSize = 32<<10 - 64
