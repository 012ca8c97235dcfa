// Command uringprobe is run inside a sandbox by the driver's seccomp test:
// it tries io_uring_setup (which the profile must refuse) and a few
// ordinary things (which it must allow), and prints one line for each:
// "NAME ok" or "NAME errno N (text)".
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"unsafe"
)

// sysIOURingSetup is io_uring_setup's number, the same on amd64 and arm64.
const sysIOURingSetup = 425

func report(name string, err error) {
	if err == nil {
		fmt.Println(name, "ok")
		return
	}
	if e, ok := err.(syscall.Errno); ok {
		fmt.Printf("%s errno %d (%v)\n", name, int(e), e)
		return
	}
	fmt.Printf("%s error (%v)\n", name, err)
}

func main() {
	var params [120]byte // struct io_uring_params
	fd, _, e := syscall.Syscall(sysIOURingSetup, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	if e != 0 {
		report("io_uring_setup", e)
	} else {
		syscall.Close(int(fd))
		report("io_uring_setup", nil)
	}
	report("unshare_mnt", syscall.Unshare(syscall.CLONE_NEWNS))
	report("write_tmp", os.WriteFile("/tmp/uringprobe.out", []byte("x"), 0o644))
	report("exec_sh", exec.Command("/bin/sh", "-c", ":").Run())
	_, err := os.Getwd()
	report("getwd", err)
}
