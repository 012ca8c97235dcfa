package agentimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// RenderOptions are the choices of one render; the zero value renders the
// pinned agent on the managed base as uid and gid 1000.
type RenderOptions struct {
	// AgentVersion overrides the agent's pin in versions.json.
	AgentVersion string
	// Docker adds Docker's static binaries (dockerd, containerd, runc, the
	// CLI) and a docker group the agent user is in.
	Docker bool
	// CustomBase is the text of the user's Dockerfile, whose last FROM
	// becomes the runner's parent and whose last stage's instructions run in
	// the runner; its earlier stages are kept. Empty: the managed base.
	CustomBase string
	// UID and GID are the agent user's ids (default 1000); on a gid clash
	// the group gets the next free gid.
	UID, GID int
	// BaseDigest is the base image's digest ("sha256:…") when the caller has
	// resolved it; empty renders a build argument, AGENTD_BASE_DIGEST,
	// whose default says "unresolved".
	BaseDigest string
}

// Where the tools go, in their stages and in the runner.
const (
	toolPrefix = "/opt/agentd-tools"
	toolBin    = toolPrefix + "/bin"
	labelNS    = LabelPrefix
	// LabelPrefix starts the name of every label of a runner image.
	LabelPrefix = "ai.devdepot.agentd.runner."
	// LabelContentID is the runner image's label that carries ContentID.
	LabelContentID = labelNS + "content-id"
	// LabelManaged marks an image agenthub built ("1").
	LabelManaged = labelNS + "managed"
	// LabelAgent is the runner image's profile name.
	LabelAgent = labelNS + "agent"
)

// managedPackages are what the managed base adds to Debian slim: the tools
// coding agents reach for.
var managedPackages = []string{
	"bash", "ca-certificates", "curl", "diffutils", "file", "findutils",
	"gawk", "git", "jq", "less", "make", "openssh-client", "patch", "procps",
	"python3", "ripgrep", "tree", "unzip", "wget", "xz-utils", "zip",
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Render returns the Dockerfile of a builder profile's runner image. It
// fails for a profile whose image is not built (ErrNothingToBuild,
// ErrImageRequired) and for options it cannot render, saying which.
func Render(p Profile, opts RenderOptions) (string, error) {
	switch p.Strategy {
	case StrategyImage:
		return "", fmt.Errorf("%s uses the image %s; %w", p.Name, p.Image, ErrNothingToBuild)
	case StrategyCustom:
		return "", fmt.Errorf("%s has no image agentd can build or pull: %w (agentctl agent run %s --image REF)", p.Name, ErrImageRequired, p.Name)
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	r := renderer{p: p, pins: Pins(), opts: opts}
	r.version = opts.AgentVersion
	if r.version == "" {
		r.version = r.pins.Agents[p.Name]
		if r.version == "" {
			return "", fmt.Errorf("%s has no pinned version in versions.json: give --agent-version", p.Name)
		}
	} else if !validVersion(r.version) {
		return "", fmt.Errorf("agent version %q: want letters, digits, '.', '+', '_' and '-'", r.version)
	}
	for _, id := range []*int{&r.opts.UID, &r.opts.GID} {
		if *id == 0 {
			*id = 1000
		}
		if *id < 1 || *id > 1<<31-2 {
			return "", fmt.Errorf("uid/gid %d: want 1 to %d", *id, 1<<31-2)
		}
	}
	if opts.BaseDigest != "" && !digestRE.MatchString(opts.BaseDigest) {
		return "", fmt.Errorf("base digest %q: want sha256: and 64 hex digits", opts.BaseDigest)
	}
	if opts.CustomBase != "" {
		b, err := parseBase(opts.CustomBase)
		if err != nil {
			return "", err
		}
		r.base = &b
	}
	text := r.render()
	return SetContentID(text, ContentID(text, nil)), nil
}

// SetContentID writes id into a rendered Dockerfile's content-id label: a
// build that overrides build arguments labels its image with the id that
// counts them (ContentID of the text and those arguments).
func SetContentID(dockerfile, id string) string {
	return contentIDLabelRE.ReplaceAllLiteralString(dockerfile, LabelContentID+`="`+id+`"`)
}

var labelRE = regexp.MustCompile(regexp.QuoteMeta(labelNS) + `([a-z.-]+)="((?:[^"\\]|\\.)*)"`)

// Labels returns the runner labels a rendered Dockerfile sets, keyed by
// their full names, values as the image will carry them (a build argument in
// a value, such as the base digest's, stays unexpanded).
func Labels(dockerfile string) map[string]string {
	out := map[string]string{}
	for _, m := range labelRE.FindAllStringSubmatch(dockerfile, -1) {
		out[labelNS+m[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\$`, `$`).Replace(m[2])
	}
	return out
}

var contentIDLabelRE = regexp.MustCompile(regexp.QuoteMeta(LabelContentID) + `="[^"]*"`)

// ContentID identifies what a runner image built from the rendered
// Dockerfile contains: a hash of the text (with its own content-id label
// blanked, so the id can be checked against the label) and of the build
// arguments the build overrides (nil for the ARG defaults, which are the
// pinned versions and already in the text). The Dockerfile needs no build
// context, so there are no context files to hash.
func ContentID(dockerfile string, buildArgs map[string]string) string {
	h := sha256.New()
	io.WriteString(h, "agentd runner image\x00")
	io.WriteString(h, contentIDLabelRE.ReplaceAllLiteralString(dockerfile, LabelContentID+`=""`))
	for _, k := range slices.Sorted(maps.Keys(buildArgs)) {
		fmt.Fprintf(h, "\x00%s=%s", k, buildArgs[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

type renderer struct {
	p       Profile
	pins    Versions
	opts    RenderOptions
	version string
	base    *customBase // nil: the managed base
	b       strings.Builder
}

func (r *renderer) line(format string, args ...any) {
	fmt.Fprintf(&r.b, format, args...)
	r.b.WriteByte('\n')
}

// run writes a RUN instruction of shell commands joined with "; ",
// one a line.
func (r *renderer) run(cmds ...string) {
	r.b.WriteString("RUN " + strings.Join(cmds, "; \\\n    ") + "\n")
}

func (r *renderer) render() string {
	if r.base != nil {
		for _, d := range r.base.directives {
			r.line("%s", d)
		}
	}
	r.header()
	r.line("")
	if r.base != nil {
		r.b.WriteString(r.base.prelude)
	}
	r.line("ARG AGENTD_DEBIAN_IMAGE=%s", r.pins.Debian)
	if r.base != nil && r.base.earlier != "" {
		r.line("")
		r.line("# The stages of the base Dockerfile before its last one, as written.")
		r.b.WriteString(r.base.earlier)
	}
	if r.base == nil {
		r.managedBase()
	}
	r.toolBase()
	if r.p.NeedsNode {
		r.nodeStage()
	}
	if r.opts.Docker {
		r.dockerStage()
	}
	r.agentStage()
	r.runner()
	return r.b.String()
}

func (r *renderer) header() {
	cmd := "agenthub image dockerfile " + r.p.Name
	if r.opts.Docker {
		cmd += " --docker"
	}
	if r.base != nil {
		cmd += " --base-dockerfile FILE"
	}
	r.line("# The agentd runner image for %s, rendered by", r.p.DisplayName)
	r.line("# '%s'.", cmd)
	r.line("# Do not edit it: change the profile or versions.json in internal/agentimage")
	r.line("# and render it again. It needs no build context: docker build - < Dockerfile")
	r.line("#")
	r.line("# Each tool stage installs under %s on the tool base; the runner", toolPrefix)
	r.line("# copies the trees in and appends %s to PATH. The versions", toolBin)
	r.line("# are the ARG defaults; the agent's is set in its own stage, so a new one")
	r.line("# rebuilds only that stage and the runner's copy of it.")
}

// aptInstall installs the packages the image does not have yet: an image
// that has them all (a prepared mirror of the base, or a test's local one)
// builds with no network and no apt-get update.
func aptInstall(pkgs []string) string {
	var rows []string
	for row := range slices.Chunk(pkgs, 8) {
		rows = append(rows, strings.Join(row, " "))
	}
	return "set -eu; missing=\"\"; \\\n" +
		"    for p in " + strings.Join(rows, " \\\n      ") + "; do \\\n" +
		"      dpkg-query -W -f='${Status}' \"$p\" 2>/dev/null | grep -q ' installed$' || missing=\"$missing $p\"; \\\n" +
		"    done; \\\n" +
		"    if [ -n \"$missing\" ]; then \\\n" +
		"      apt-get update; \\\n" +
		"      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; \\\n" +
		"      rm -rf /var/lib/apt/lists/*; \\\n" +
		"    fi"
}

func (r *renderer) managedBase() {
	pkgs := managedPackages
	comment := "# The managed base: Debian slim and the command-line tools agents expect."
	if r.opts.Docker {
		pkgs = slices.Sorted(slices.Values(append(slices.Clone(pkgs), "iptables")))
		comment = "# The managed base: Debian slim, the command-line tools agents expect and\n# iptables for dockerd."
	}
	r.line("")
	r.line("%s", comment)
	r.line("FROM ${AGENTD_DEBIAN_IMAGE} AS agentd-base")
	r.line("USER root")
	r.line("RUN %s", aptInstall(pkgs))
}

func (r *renderer) toolBase() {
	r.line("")
	r.line("# The tool base: what the tool stages download and unpack with.")
	if r.base != nil && len(r.base.flags) > 0 {
		// The tools must be built for the platform the runner is.
		r.line("FROM %s ${AGENTD_DEBIAN_IMAGE} AS agentd-tools", strings.Join(r.base.flags, " "))
	} else {
		r.line("FROM ${AGENTD_DEBIAN_IMAGE} AS agentd-tools")
	}
	r.line("USER root")
	r.line("RUN %s", aptInstall([]string{"ca-certificates", "curl", "tar"}))
}

func (r *renderer) nodeStage() {
	r.line("")
	r.line("# Node.js for the agent, checked against the release's SHASUMS256.txt")
	r.line("# (which catches a corrupt download, not a compromised server).")
	r.line("FROM agentd-tools AS agentd-node")
	r.line("ARG AGENTD_NODE_VERSION=%s", r.pins.Node)
	r.run(
		"set -eu",
		`case "$(dpkg --print-architecture)" in \`+"\n"+
			`      amd64) arch=x64 ;; \`+"\n"+
			`      arm64) arch=arm64 ;; \`+"\n"+
			`      *) echo "agentd: no Node.js build for $(dpkg --print-architecture)" >&2; exit 1 ;; \`+"\n"+
			`    esac`,
		`v="v${AGENTD_NODE_VERSION}"; f="node-$v-linux-$arch.tar.gz"`,
		`cd /tmp`,
		`curl -fsSLO "https://nodejs.org/dist/$v/$f"`,
		`curl -fsSLO "https://nodejs.org/dist/$v/SHASUMS256.txt"`,
		`grep " $f\$" SHASUMS256.txt | sha256sum -c -`,
		`mkdir -p `+toolPrefix+`/node`,
		`tar -xzf "$f" -C `+toolPrefix+`/node --strip-components=1 --no-same-owner`,
		`rm -f "$f" SHASUMS256.txt`,
	)
	r.line("ENV PATH=%s/node/bin:$PATH", toolPrefix)
}

func (r *renderer) dockerStage() {
	r.line("")
	r.line("# Docker's static binaries: dockerd, containerd, runc and the CLI.")
	r.line("# download.docker.com publishes no checksums for them; TLS is the check.")
	r.line("FROM agentd-tools AS agentd-docker")
	r.line("ARG AGENTD_DOCKER_VERSION=%s", r.pins.Docker)
	r.run(
		"set -eu",
		`case "$(dpkg --print-architecture)" in \`+"\n"+
			`      amd64) arch=x86_64 ;; \`+"\n"+
			`      arm64) arch=aarch64 ;; \`+"\n"+
			`      *) echo "agentd: no static Docker build for $(dpkg --print-architecture)" >&2; exit 1 ;; \`+"\n"+
			`    esac`,
		`f="docker-${AGENTD_DOCKER_VERSION}.tgz"`,
		`curl -fsSL -o "/tmp/$f" "https://download.docker.com/linux/static/stable/$arch/$f"`,
		`mkdir -p `+toolPrefix+`/docker/bin `+toolBin,
		`tar -xzf "/tmp/$f" -C `+toolPrefix+`/docker/bin --strip-components=1 --no-same-owner`,
		`rm -f "/tmp/$f"`,
		`for b in `+toolPrefix+`/docker/bin/*; do ln -s "../docker/bin/${b##*/}" `+toolBin+`/; done`,
	)
}

func (r *renderer) agentPrefix() string { return toolPrefix + "/agents/" + r.p.Name }

func (r *renderer) agentStage() {
	prefix, exe := r.agentPrefix(), r.p.Executable
	r.line("")
	var cmds []string
	if npm := r.p.Install.NPM; npm != "" {
		r.line("# %s from npm, under its own prefix. Its launcher is made to name the", r.p.DisplayName)
		r.line("# pinned node, which is not on PATH: the agent runs on it whatever the base has.")
		r.line("FROM agentd-node AS agentd-agent")
		r.line("ARG AGENTD_AGENT_VERSION=%s", r.version)
		cmds = []string{
			"set -eu",
			"prefix=" + prefix,
			`npm install --global --prefix "$prefix" --cache /tmp/npm-cache \` + "\n" +
				`      --no-audit --no-fund --no-update-notifier "` + npm + `@${AGENTD_AGENT_VERSION}"`,
			"rm -rf /tmp/npm-cache",
			`exe="$prefix/bin/` + exe + `"`,
			`[ -x "$exe" ] || { echo "agentd: ` + npm + ` installed no bin/` + exe + `" >&2; exit 1; }`,
			`first="$(head -c 64 "$exe" | head -n 1)"`,
			`case "$first" in '#!/usr/bin/env node'*) \` + "\n" +
				`      sed -i --follow-symlinks '1s|^#!/usr/bin/env node|#!` + toolPrefix + `/node/bin/node|' "$exe"; \` + "\n" +
				`      first="$(head -c 64 "$exe" | head -n 1)" ;; \` + "\n" +
				`    esac`,
			`case "$first" in '#!` + toolPrefix + `/node/bin/node'*|[!#]*) ;; \` + "\n" +
				`      *) echo "agentd: bin/` + exe + ` starts with $first, not a node script or a binary" >&2; exit 1 ;; \` + "\n" +
				`    esac`,
		}
	} else {
		r.line("# %s, installed by the profile's script under its own prefix.", r.p.DisplayName)
		from := "agentd-tools"
		if r.p.NeedsNode {
			from = "agentd-node"
		}
		r.line("FROM %s AS agentd-agent", from)
		r.line("ARG AGENTD_AGENT_VERSION=%s", r.version)
		cmds = append([]string{
			"set -eu",
			"PREFIX=" + prefix + `; VERSION="${AGENTD_AGENT_VERSION}"; ARCH="$(dpkg --print-architecture)"`,
			`mkdir -p "$PREFIX/bin"`,
		}, r.p.Install.Script...)
		cmds = append(cmds,
			`exe="$PREFIX/bin/`+exe+`"`,
			`[ -x "$exe" ] || { echo "agentd: the install script left no bin/`+exe+`" >&2; exit 1; }`)
	}
	cmds = append(cmds,
		"mkdir -p "+toolBin,
		"ln -s ../agents/"+r.p.Name+"/bin/"+exe+" "+toolBin+"/"+exe)
	r.run(cmds...)
}

func (r *renderer) runner() {
	r.line("")
	r.line("# The runner: the base, the agent user, the tool trees, PATH.")
	if r.base == nil {
		r.line("FROM agentd-base AS agentd-runner")
	} else {
		r.line("%s", strings.Join(slices.Concat([]string{"FROM"}, r.base.flags, []string{r.base.ref, "AS", "agentd-runner"}), " "))
		r.line("USER root")
	}
	if r.opts.BaseDigest == "" {
		// Declared first: its value changes only with the base.
		r.line("ARG AGENTD_BASE_DIGEST=unresolved")
	}
	r.userStep()
	if r.base != nil {
		if r.base.body != "" {
			r.line("# The last stage of the base Dockerfile, as written; the agent user exists.")
			r.b.WriteString(r.base.body)
		}
		r.line("USER root")
		r.prerequisites()
	}
	if env := r.p.SelfUpdateEnv; len(env) > 0 {
		r.line("# Turn the agent's self-update off: the image pins its version.")
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(env)) {
			kv = append(kv, k+"="+env[k])
		}
		r.line("ENV %s", strings.Join(kv, " "))
	}
	r.line("# The tool bin directory goes last on PATH: the base's own commands win.")
	r.line("ENV PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}:%s", toolBin)
	r.line("# Login shells reset PATH in /etc/profile: record it, restore it from profile.d.")
	r.run(
		"mkdir -p "+toolPrefix+" /etc/profile.d",
		`printf '%s\n' "$PATH" > `+toolPrefix+`/path`,
		`printf '%s\n' \`+"\n"+
			`      '# agentd: restore the PATH the runner image was built with (/etc/profile resets it).' \`+"\n"+
			`      'if [ -r `+toolPrefix+`/path ]; then IFS= read -r PATH < `+toolPrefix+`/path; export PATH; fi' \`+"\n"+
			`      > /etc/profile.d/00-agentd-path.sh`,
	)
	// The tool trees last: a new agent version changes only the steps from
	// its COPY on, each of which commits a layer.
	r.line("USER agent")
	r.line("WORKDIR /workspace")
	if r.p.NeedsNode {
		r.line("COPY --from=agentd-node %s/node/ %s/node/", toolPrefix, toolPrefix)
	}
	if r.opts.Docker {
		r.line("COPY --from=agentd-docker %s/docker/ %s/docker/", toolPrefix, toolPrefix)
		r.line("COPY --from=agentd-docker %s/ %s/", toolBin, toolBin)
	}
	r.line("COPY --from=agentd-agent %s/ %s/", r.agentPrefix(), r.agentPrefix())
	r.line("COPY --from=agentd-agent %s/ %s/", toolBin, toolBin)
	r.labels()
}

// userStep creates the agent user, or accepts the base's when it has the
// uid; its group takes the gid, or the next free one.
func (r *renderer) userStep() {
	uid, gid := r.opts.UID, r.opts.GID
	r.line("# The agent user, uid %d; its group gets gid %d, or the next free gid.", uid, gid)
	tools := "getent groupadd useradd id"
	if r.opts.Docker {
		tools += " usermod"
	}
	cmds := []string{
		"set -eu",
		"for t in " + tools + `; do \` + "\n" +
			`      command -v "$t" >/dev/null 2>&1 || { echo "agentd: the base image has no $t: install the shadow utilities (Debian, Ubuntu: passwd; Alpine: shadow; Fedora: shadow-utils)" >&2; exit 1; }; \` + "\n" +
			`    done`,
		fmt.Sprintf(`if entry="$(getent passwd agent)"; then \`+"\n"+
			`      uid="${entry#*:*:}"; uid="${uid%%%%:*}"; \`+"\n"+
			`      [ "$uid" = %[1]d ] || { echo "agentd: the base image has a user agent with uid $uid, not %[1]d" >&2; exit 1; }; \`+"\n"+
			`    elif entry="$(getent passwd %[1]d)"; then \`+"\n"+
			`      echo "agentd: uid %[1]d is the base image's user ${entry%%%%:*}: remove it in an earlier stage, or use another uid" >&2; exit 1; \`+"\n"+
			`    else \`+"\n"+
			`      if ! getent group agent >/dev/null; then \`+"\n"+
			`        gid=%[2]d; while getent group "$gid" >/dev/null; do gid=$((gid + 1)); done; \`+"\n"+
			`        groupadd --gid "$gid" agent; \`+"\n"+
			`      fi; \`+"\n"+
			`      shell=/bin/sh; if [ -x /bin/bash ]; then shell=/bin/bash; fi; \`+"\n"+
			`      useradd --uid %[1]d --gid agent --home-dir /home/agent --create-home --shell "$shell" agent; \`+"\n"+
			`    fi`, uid, gid),
	}
	if r.opts.Docker {
		cmds = append(cmds,
			"if ! getent group docker >/dev/null; then groupadd --system docker; fi",
			"usermod -a -G docker agent")
	}
	cmds = append(cmds, "mkdir -p /workspace", `chown "agent:$(id -gn agent)" /workspace`)
	r.run(cmds...)
}

// prerequisites checks what a custom base must have after its own
// instructions ran, naming each thing missing.
func (r *renderer) prerequisites() {
	r.line("# What the runner needs from the base, checked after its instructions ran.")
	cmds := []string{
		`set -u; missing=""`,
		`for t in getent groupadd useradd; do command -v "$t" >/dev/null 2>&1 || missing="$missing, $t (shadow utilities)"; done`,
		`grep -qs 'profile.d' /etc/profile || missing="$missing, an /etc/profile that sources /etc/profile.d (login shells get the image's PATH from there)"`,
	}
	if r.opts.Docker {
		cmds = append(cmds, `for t in iptables git ps xz; do command -v "$t" >/dev/null 2>&1 || missing="$missing, $t (for dockerd)"; done`)
	}
	cmds = append(cmds, `if [ -n "$missing" ]; then echo "agentd: the base image lacks ${missing#, }" >&2; exit 1; fi`)
	r.run(cmds...)
}

// labels writes the runner's labels; the content id is blank here and
// filled in by Render.
func (r *renderer) labels() {
	baseRef, inputBase := r.pins.Debian, "managed"
	if r.base != nil {
		baseRef, inputBase = r.base.ref, "custom "+r.base.sum
	}
	digest := r.opts.BaseDigest
	if digest == "" {
		digest = "${AGENTD_BASE_DIGEST}" // declared at the top of the stage
	}
	agent := "script:" + r.p.Name + "@" + r.version
	if npm := r.p.Install.NPM; npm != "" {
		agent = "npm:" + npm + "@" + r.version
	}
	labels := [][2]string{
		{"managed", quote("1")},
		{"agent", quote(r.p.Name)},
		{"base", `"` + escape(baseRef) + "@" + digest + `"`},
		{"input.base", quote(inputBase)},
		{"input.tools", quote(r.pins.Debian)},
	}
	if r.p.NeedsNode {
		labels = append(labels, [2]string{"input.node", quote(r.pins.Node)})
	}
	if r.opts.Docker {
		labels = append(labels, [2]string{"input.docker", quote(r.pins.Docker)})
	}
	labels = append(labels,
		[2]string{"input.agent", quote(agent)},
		[2]string{"input.user", quote(fmt.Sprintf("%d:%d", r.opts.UID, r.opts.GID))},
		[2]string{"content-id", quote("")},
	)
	rows := make([]string, len(labels))
	for i, l := range labels {
		rows[i] = labelNS + l[0] + "=" + l[1]
	}
	r.line("LABEL %s", strings.Join(rows, " \\\n      "))
}

// quote writes s as a double-quoted Dockerfile word taken literally.
func quote(s string) string { return `"` + escape(s) + `"` }

// escape escapes what a double-quoted Dockerfile word would interpret.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(s)
}
