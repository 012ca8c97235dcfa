// Package releases answers the hub's question "what is the latest
// release of this agent?" (sandboxes.ReleaseResolver), so that agentctl
// agent run can tell when an image pins an older version than the one
// published. NPM asks an npm registry; script-installed agents have no
// answer.
package releases
