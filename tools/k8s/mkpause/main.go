// Command mkpause writes an OCI image archive holding one static binary as
// /pause (its entrypoint), for `ctr images import`: the local cluster's
// sandbox image, made here instead of pulled. With -path and -user it packs
// any static binary the same way: make k8s-up makes the kubernetes
// driver's agentd image (/agentd, the init container's) with it.
//
//	mkpause -bin ./pause -name agentd.local/pause:1 -o pause.tar
//	mkpause -bin bin/agentd -path agentd -user 1000:1000 -name agentd.local/agentd:dev -o agentd.tar
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

func main() {
	bin := flag.String("bin", "", "the static binary to put at /pause")
	name := flag.String("name", "agentd.local/pause:1", "the image reference to record")
	out := flag.String("o", "pause.tar", "the OCI archive to write")
	path := flag.String("path", "pause", "the binary's path in the image (its entrypoint), without the leading /")
	user := flag.String("user", "65535:65535", "the image's user (uid:gid)")
	flag.Parse()
	if err := run(*bin, *name, *out, *path, *user); err != nil {
		fmt.Fprintln(os.Stderr, "mkpause:", err)
		os.Exit(1)
	}
}

type blob struct {
	path string
	data []byte
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func run(bin, name, out, path, user string) error {
	if bin == "" {
		return fmt.Errorf("-bin is required")
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	epoch := time.Unix(0, 0).UTC()
	// The layer: /pause, uncompressed tar for the diff id, gzip for the blob.
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o755, Size: int64(len(exe)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(exe); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	layer := gz.Bytes()
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": []string{"/" + path}, "User": user},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(raw.Bytes())}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(layer), "size": len(layer)}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    digest(manifest), "size": len(manifest),
			"platform":    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
		}},
	})
	if err != nil {
		return err
	}
	var files []blob
	for _, b := range [][]byte{layer, config, manifest} {
		d := digest(b)
		files = append(files, blob{"blobs/sha256/" + d[len("sha256:"):], b})
	}
	files = append(files, blob{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, blob{"index.json", index})
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := w.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
			f.Close()
			return err
		}
	}
	for _, b := range files {
		if err := w.WriteHeader(&tar.Header{Name: b.path, Mode: 0o644, Size: int64(len(b.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(b.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
