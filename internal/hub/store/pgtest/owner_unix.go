//go:build unix

package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// owner is the unprivileged user the cluster runs as when the tests run as
// root (initdb and postgres refuse root); nil otherwise.
var owner *syscall.Credential

// prepareDir makes dir the cluster owner's. As root, the owner is nobody.
func prepareDir(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return fmt.Errorf("running as root, and no user nobody to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	owner = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	return nil
}

// asOwner runs cmd as the cluster's owner.
func asOwner(cmd *exec.Cmd) {
	if owner != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner}
	}
}
