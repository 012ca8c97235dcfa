package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// entriesOf lists tar entries as archive entries, with their sha256 and
// their contents by path.
func entriesOf(es []tentry) ([]Entry, map[string]string) {
	var out []Entry
	data := map[string]string{}
	for _, te := range es {
		e := Entry{Path: strings.TrimSuffix(te.Name, "/"), Mode: uint32(te.Mode), ModTime: t0}
		switch te.Type {
		case tar.TypeDir:
			e.Type = TypeDir
		case tar.TypeSymlink:
			e.Type, e.Target = TypeSymlink, te.Link
		default:
			sum := sha256.Sum256([]byte(te.Data))
			e.Type, e.Size, e.SHA256 = TypeFile, int64(len(te.Data)), hex.EncodeToString(sum[:])
			data[e.Path] = te.Data
		}
		out = append(out, e)
	}
	return out, data
}

// opener serves contents from data, counting the opens.
func opener(data map[string]string, opens *atomic.Int32) OpenFunc {
	return func(_ context.Context, e Entry) (io.ReadCloser, error) {
		opens.Add(1)
		return io.NopCloser(strings.NewReader(data[e.Path])), nil
	}
}

func testPutEntries(t *testing.T, s *Store) {
	ctx := context.Background()
	ws := workspace(5, 30)
	entries, data := entriesOf(ws)
	var opens atomic.Int32

	// A new org: every distinct content is opened once and uploaded.
	m, err := s.PutEntries(ctx, "pe", "sb", entries, opener(data, &opens))
	if err != nil {
		t.Fatal(err)
	}
	if int(opens.Load()) != len(data) || m.NewBytes != m.TotalBytes {
		t.Errorf("first PutEntries opened %d of %d files, uploaded %d of %d bytes", opens.Load(), len(data), m.NewBytes, m.TotalBytes)
	}
	if diff := cmp.Diff(readTar(t, makeTar(t, ws)), readTar(t, restore(t, s, "pe", m.ID))); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}

	// Unchanged: nothing is opened, nothing uploaded.
	opens.Store(0)
	again, err := s.PutEntries(ctx, "pe", "sb", entries, opener(data, &opens))
	if err != nil {
		t.Fatal(err)
	}
	if opens.Load() != 0 || again.NewBytes != 0 {
		t.Errorf("re-archive opened %d files, uploaded %d bytes; want none", opens.Load(), again.NewBytes)
	}
	if err := s.Verify(ctx, "pe", again.ID); err != nil {
		t.Error(err)
	}

	// A file whose content is not what its entry says.
	es2, data2 := entriesOf(workspace(6, 5))
	bad := es2[3].Path
	data2[bad] = "something else"
	_, err = s.PutEntries(ctx, "pe", "sb", es2, opener(data2, &opens))
	if !errors.Is(err, ErrChanged) || errs.KindOf(err) != errs.Precondition || !strings.Contains(err.Error(), bad) {
		t.Errorf("PutEntries with a changed file = %v; want ErrChanged naming %s", err, bad)
	}
	if ids, _ := s.List(ctx, "pe"); len(ids) != 2 {
		t.Errorf("List = %v; want the two good archives only", ids)
	}

	for _, tc := range []struct {
		name string
		edit func(e []Entry) []Entry
	}{
		{"bad sha256", func(e []Entry) []Entry { e[3].SHA256 = "xyz"; return e }},
		{"duplicate path", func(e []Entry) []Entry { return append(e, e[3]) }},
		{"climbs out", func(e []Entry) []Entry { e[3].Path = "../x"; return e }},
		{"unclean path", func(e []Entry) []Entry { e[3].Path = "src//x"; return e }},
		{"bad type", func(e []Entry) []Entry { e[3].Type = "fifo"; return e }},
		{"negative size", func(e []Entry) []Entry { e[3].Size = -1; return e }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, _ := entriesOf(workspace(6, 5))
			if _, err := s.PutEntries(ctx, "pe", "", tc.edit(es), opener(nil, &opens)); errs.KindOf(err) != errs.Invalid {
				t.Errorf("PutEntries = %v; want invalid", err)
			}
		})
	}
}
