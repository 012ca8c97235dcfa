package releases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

// Timeout bounds the newer-release question: a run never waits on it
// for long, and an unanswered one is no notice.
const Timeout = 3 * time.Second

// NPM answers ReleaseResolver for npm-installed agents from an npm
// registry's "latest" dist-tag, remembering each answer for an hour.
// Script-installed agents have no answer.
type NPM struct {
	// Registry is the registry's base URL. Default https://registry.npmjs.org.
	Registry string
	// Client makes the requests. Default: one that gives up after Timeout.
	Client *http.Client

	mu    sync.Mutex
	cache map[string]release
}

type release struct {
	version string
	at      time.Time
}

// cacheTTL is how long an answer is used again.
const cacheTTL = time.Hour

var _ sandboxes.ReleaseResolver = (*NPM)(nil)

// Latest returns the latest version of p's npm package.
func (n *NPM) Latest(ctx context.Context, p agentimage.Profile) (string, error) {
	if p.Install == nil || p.Install.NPM == "" {
		return "", nil
	}
	pkg := p.Install.NPM
	n.mu.Lock()
	if r, ok := n.cache[pkg]; ok && time.Since(r.at) < cacheTTL {
		n.mu.Unlock()
		return r.version, nil
	}
	n.mu.Unlock()

	base := strings.TrimSuffix(n.Registry, "/")
	if base == "" {
		base = "https://registry.npmjs.org"
	}
	client := n.Client
	if client == nil {
		client = &http.Client{Timeout: Timeout}
	}
	// A scoped name keeps its @ and has its / escaped, as npm does.
	u := base + "/" + strings.Replace(url.PathEscape(pkg), "%40", "@", 1) + "/latest"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("npm registry: %s for %s", resp.Status, pkg)
	}
	var body struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", fmt.Errorf("npm registry: %s: %w", pkg, err)
	}
	if body.Version == "" || len(body.Version) > 64 {
		return "", errors.New("npm registry: no usable version for " + pkg)
	}
	n.mu.Lock()
	if n.cache == nil {
		n.cache = map[string]release{}
	}
	n.cache[pkg] = release{version: body.Version, at: time.Now()}
	n.mu.Unlock()
	return body.Version, nil
}
