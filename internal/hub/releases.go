package hub

import "github.com/devdepot-ai/agentd/internal/hub/releases"

// NPMReleases answers ReleaseResolver for npm-installed agents from an npm
// registry's "latest" dist-tag, remembering each answer for an hour
// (package releases).
type NPMReleases = releases.NPM
