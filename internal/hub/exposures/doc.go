// Package exposures is the hub's PreviewService: it makes, lists and
// ends the exposures of a machine's or sandbox's ports (the preview URLs
// of agentctl port expose, and the console's list of live previews with
// its revoke), and records each change, and each connection the preview
// server served, in the activity log.
//
// The preview server (package preview) serves the exposures; the hub
// tells this package who is calling, which machine or sandbox a call
// names and whether the caller may reach it, through the narrow Hub
// interface. Errors are domain errors (internal/errs); the hub's
// interceptor makes their status codes at the edge.
package exposures
