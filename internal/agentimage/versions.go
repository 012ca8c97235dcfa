package agentimage

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Versions are the pins of the builder: one file (versions.json), rendered
// as the ARG defaults of every Dockerfile.
type Versions struct {
	// Debian is the Debian slim image of the managed base and the tool base,
	// with its registry and a dated tag (or a digest).
	Debian string `json:"debian"`
	// Node is the Node.js release installed for agents that need Node.
	Node string `json:"node"`
	// Docker is the release of Docker's static binaries (--docker).
	Docker string `json:"docker"`
	// Agents maps a builder profile's name to its agent's version.
	Agents map[string]string `json:"agents"`
}

// versionRE is what may stand in an ARG default unquoted.
var versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)

// validVersion reports whether v can be an ARG default and part of a
// package spec.
func validVersion(v string) bool { return versionRE.MatchString(v) && len(v) <= 128 }

// ParseVersions decodes a versions file strictly and validates it.
func ParseVersions(data []byte) (Versions, error) {
	var v Versions
	if err := decodeStrict(data, &v); err != nil {
		return Versions{}, fmt.Errorf("versions: %w", err)
	}
	if err := validImageRef(v.Debian); err != nil {
		return Versions{}, fmt.Errorf("versions: debian: %w", err)
	}
	if !strings.Contains(v.Debian, "slim") {
		return Versions{}, fmt.Errorf("versions: debian %q: want a slim image", v.Debian)
	}
	for k, s := range map[string]string{"node": v.Node, "docker": v.Docker} {
		if !validVersion(s) {
			return Versions{}, fmt.Errorf("versions: %s %q: want a version", k, s)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.Agents)) {
		if !validVersion(v.Agents[k]) {
			return Versions{}, fmt.Errorf("versions: agents.%s %q: want a version", k, v.Agents[k])
		}
	}
	if len(v.Agents) == 0 {
		return Versions{}, errors.New("versions: agents is empty")
	}
	return v, nil
}

//go:embed versions.json
var versionsFile []byte

// Pins returns the versions built into agentd (versions.json). The file is
// checked by the package's tests; Pins panics if it is invalid.
func Pins() Versions {
	v, err := ParseVersions(versionsFile)
	if err != nil {
		panic(fmt.Sprintf("agentimage: embedded %v", err))
	}
	return v
}
