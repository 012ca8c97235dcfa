// Package imagecheck checks a custom sandbox image against the registry
// before anything is pulled into Docker, and says in a report what would
// break for the agent and how to fix it.
//
// Why before the pull: a pull of a multi-gigabyte image (or one for the
// wrong platform, or one the engine cannot pull without credentials) costs
// minutes of engine time and disk before the hub learns what the manifest,
// index and config already say. So these checks read only those (no
// layers), over the network, with anonymous credentials, exactly as a
// sandbox host will later pull the image; anything they refuse is never
// pulled. Checks that need the image's filesystem (tools, users,
// directories) run after the pull, elsewhere.
//
// Every problem the user can fix is a failed (or warned) check with the
// breakage and the fix, never an error: Run returns an error only for
// faults of its own (a cancelled context). The Result carries the
// linux/amd64 manifest's digest, which is what the hub pins and pulls, so
// what was checked is exactly what runs.
package imagecheck
