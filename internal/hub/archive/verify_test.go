package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"
)

// testVerifyRest checks that VerifyRest reads back what the Put did not:
// a blob the org had already (deduplicated, so only its existence was
// checked) is read and its corruption found, and a blob the Put uploaded
// and read back is not read a second time.
func testVerifyRest(t *testing.T, s *Store) {
	ctx := context.Background()
	first := put(t, s, "vr", makeTar(t, []tentry{
		{Name: "old", Type: tar.TypeReg, Mode: 0o644, Data: "content the org has"},
	}))
	if err := s.VerifyRest(ctx, first); err != nil {
		t.Fatalf("VerifyRest of a fresh Put: %v", err)
	}
	oldKey := blobKey("vr", first.Entries[0].SHA256)
	old, err := s.bucket.ReadAll(ctx, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(old)
	bad[0] ^= 1
	// Same size: Put's existence check takes it as the content.
	if err := s.bucket.WriteAll(ctx, oldKey, bad, nil); err != nil {
		t.Fatal(err)
	}
	second := put(t, s, "vr", makeTar(t, []tentry{
		{Name: "again", Type: tar.TypeReg, Mode: 0o644, Data: "content the org has"},
		{Name: "new", Type: tar.TypeReg, Mode: 0o644, Data: "content the org lacks"},
	}))
	if second.NewBytes != int64(len("content the org lacks")) {
		t.Fatalf("NewBytes = %d: the first blob was uploaded again", second.NewBytes)
	}
	if err := s.VerifyRest(ctx, second); !isCorrupt(err) || !strings.Contains(err.Error(), "again") {
		t.Errorf("VerifyRest with a corrupt deduplicated blob: %v; want a corruption error naming \"again\"", err)
	}
	if err := s.bucket.WriteAll(ctx, oldKey, old, nil); err != nil {
		t.Fatal(err)
	}
	// Now damage the blob the second Put uploaded and read back itself:
	// VerifyRest does not read it again, Verify (from the stored
	// manifest) does.
	newKey := blobKey("vr", second.Entries[1].SHA256)
	if err := s.bucket.WriteAll(ctx, newKey, []byte("CONTENT THE ORG LACKS"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRest(ctx, second); err != nil {
		t.Errorf("VerifyRest read back a blob its Put had read back already: %v", err)
	}
	if err := s.Verify(ctx, "vr", second.ID); !isCorrupt(err) {
		t.Errorf("Verify of a damaged blob: %v; want a corruption error", err)
	}
	got, err := s.Get(ctx, "vr", second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRest(ctx, got); !isCorrupt(err) {
		t.Errorf("VerifyRest of a manifest from Get (no record of a read-back): %v; want a corruption error", err)
	}
}
