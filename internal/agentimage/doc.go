// Package agentimage holds the coding-agent profiles (what agentd knows
// about running Codex, Claude Code, OpenCode, Pi, Aider, Goose and Command
// Code in a sandbox) and renders the Dockerfile of an agent's runner image.
//
// Profiles are data, one JSON file each under profiles/, embedded in the
// binary and decoded strictly (an unknown field is an error, so a typo never
// silently drops a limit). They carry deliberate defaults — CPUs, memory,
// pids, network, TTL — and the agent's risks, never an API key or any
// provider credential: those come from the user's secrets at run time.
//
// An agent's image comes one of three ways (Profile.Strategy): built here
// from pinned parts ("builder"), a published image used as is ("image"), or
// an image the user names with --image ("custom"). Only "builder" profiles
// have a Dockerfile.
//
// Why the Dockerfile has the shape it has (see Render):
//
//   - The parents are fixed and pinned, the versions are ARG defaults from one
//     file (versions.json), and nothing needs a build context, so the text
//     alone says what the image contains; ContentID hashes it.
//   - Each tool is installed in its own stage on a small tool base under
//     /opt/agentd-tools, and the runner only COPYs the trees in: a tool never
//     sees, or depends on, what the user's base contains, and the user's base
//     never gets a compiler or a package manager's cache from us.
//   - The agent's version is declared inside the agent stage, after node:
//     bumping it re-runs that stage and the runner's COPY of it, nothing else.
//   - The tool bin directory is appended to PATH, so the base's own binaries
//     win; the agent itself always runs on the pinned Node (its script's
//     interpreter line names it), whatever node the base has.
//   - The Dockerfile uses nothing BuildKit-only (no heredocs, no --chmod, no
//     cache mounts): the engines the hub runs on are as old as 20.10.
package agentimage
