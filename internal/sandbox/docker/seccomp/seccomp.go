// Package seccomp is the seccomp profile of sandbox containers: Docker's
// default policy for a container without capabilities, written here as an
// allow list, minus io_uring (as Docker 25 and later ship it; engine 20.10's
// default allows io_uring_setup, _enter and _register, whose kernel code has
// been a steady source of privilege escalations, and which bypasses the
// per-syscall filter for the operations it queues).
//
// syscalls.txt lists every system call name of linux/amd64 and linux/arm64,
// generated from golang.org/x/sys/unix's tables (zsysnum_linux_*.go):
//
//	grep -hoE '^\s*SYS_[A-Z0-9_]+' zsysnum_linux_{amd64,arm64}.go | sed 's/.*SYS_//' | tr A-Z a-z | sort -u
//
// A call is allowed when it is on that list and not in denied; any other
// (io_uring, one the list does not know yet) fails with EPERM. clone is
// allowed without namespace flags only, personality with the values
// ordinary programs use, and clone3 fails with ENOSYS so that C libraries
// fall back to clone (whose flags a filter can see).
package seccomp

import (
	_ "embed"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
)

//go:embed syscalls.txt
var syscallsTxt string

// denied are the calls a sandbox never makes, with why: most need a
// capability the container does not have (Docker's default denies them
// for the same reason), the rest reach kernel surfaces no workload needs.
var denied = map[string]string{
	"io_uring_setup":    "io_uring",
	"io_uring_enter":    "io_uring",
	"io_uring_register": "io_uring",
	"acct":              "CAP_SYS_PACCT",
	"add_key":           "kernel keyring",
	"keyctl":            "kernel keyring",
	"request_key":       "kernel keyring",
	"bpf":               "CAP_SYS_ADMIN / CAP_BPF",
	"perf_event_open":   "kernel profiling",
	"clock_adjtime":     "CAP_SYS_TIME",
	"clock_settime":     "CAP_SYS_TIME",
	"settimeofday":      "CAP_SYS_TIME",
	"create_module":     "CAP_SYS_MODULE",
	"delete_module":     "CAP_SYS_MODULE",
	"finit_module":      "CAP_SYS_MODULE",
	"init_module":       "CAP_SYS_MODULE",
	"get_kernel_syms":   "CAP_SYS_MODULE",
	"query_module":      "CAP_SYS_MODULE",
	"ioperm":            "CAP_SYS_RAWIO",
	"iopl":              "CAP_SYS_RAWIO",
	"kcmp":              "CAP_SYS_PTRACE",
	"kexec_file_load":   "CAP_SYS_BOOT",
	"kexec_load":        "CAP_SYS_BOOT",
	"reboot":            "CAP_SYS_BOOT",
	"lookup_dcookie":    "CAP_SYS_ADMIN",
	"mount":             "CAP_SYS_ADMIN",
	"umount2":           "CAP_SYS_ADMIN",
	"fsopen":            "CAP_SYS_ADMIN",
	"fsconfig":          "CAP_SYS_ADMIN",
	"fsmount":           "CAP_SYS_ADMIN",
	"fspick":            "CAP_SYS_ADMIN",
	"move_mount":        "CAP_SYS_ADMIN",
	"open_tree":         "CAP_SYS_ADMIN",
	"mount_setattr":     "CAP_SYS_ADMIN",
	"pivot_root":        "CAP_SYS_ADMIN",
	"quotactl":          "CAP_SYS_ADMIN",
	"quotactl_fd":       "CAP_SYS_ADMIN",
	"setns":             "CAP_SYS_ADMIN",
	"unshare":           "CAP_SYS_ADMIN (user namespaces)",
	"swapon":            "CAP_SYS_ADMIN",
	"swapoff":           "CAP_SYS_ADMIN",
	"syslog":            "CAP_SYSLOG",
	"vhangup":           "CAP_SYS_TTY_CONFIG",
	"name_to_handle_at": "CAP_DAC_READ_SEARCH",
	"open_by_handle_at": "CAP_DAC_READ_SEARCH",
	"nfsservctl":        "obsolete",
	"sysfs":             "obsolete",
	"_sysctl":           "obsolete",
	"uselib":            "obsolete",
	"ustat":             "obsolete",
	"userfaultfd":       "exploitation aid",
	"mbind":             "CAP_SYS_NICE",
	"set_mempolicy":     "CAP_SYS_NICE",
	"get_mempolicy":     "CAP_SYS_NICE",
	"migrate_pages":     "CAP_SYS_NICE",
	"move_pages":        "CAP_SYS_NICE",
	"clone":             "filtered below",
	"clone3":            "filtered below",
	"personality":       "filtered below",
	"chroot":            "CAP_SYS_CHROOT",
}

// cloneNewFlags are the namespace flags of clone (CLONE_NEWNS, NEWCGROUP,
// NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): 0x7E020000.
const cloneNewFlags = 0x7E020000

// enosys is what clone3 returns.
const enosys = 38

type arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

type rule struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	Args     []arg    `json:"args,omitempty"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
}

type profile struct {
	DefaultAction string   `json:"defaultAction"`
	Architectures []string `json:"architectures"`
	Syscalls      []rule   `json:"syscalls"`
}

// Allowed returns the calls allowed without conditions, sorted.
func Allowed() []string {
	var out []string
	for _, n := range strings.Fields(syscallsTxt) {
		if _, no := denied[n]; !no {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	once sync.Once
	js   string
)

// Profile returns the profile as JSON, for HostConfig.SecurityOpt
// "seccomp=<json>".
func Profile() string {
	once.Do(func() {
		no := uint(enosys)
		p := profile{
			DefaultAction: "SCMP_ACT_ERRNO",
			Architectures: architectures(),
			Syscalls: []rule{
				{Names: Allowed(), Action: "SCMP_ACT_ALLOW"},
				{Names: []string{"clone"}, Action: "SCMP_ACT_ALLOW",
					Args: []arg{{Index: cloneFlagsArg(), Value: cloneNewFlags, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}},
				{Names: []string{"clone3"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &no},
			},
		}
		// The personalities ordinary programs set: PER_LINUX, UNAME26,
		// ADDR_NO_RANDOMIZE (setarch -R), both, and the query.
		for _, v := range []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff} {
			p.Syscalls = append(p.Syscalls, rule{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW",
				Args: []arg{{Index: 0, Value: v, Op: "SCMP_CMP_EQ"}}})
		}
		b, err := json.Marshal(p)
		if err != nil {
			panic(err) // fixed data
		}
		js = string(b)
	})
	return js
}

// architectures are the host's native ones: a sandbox image is checked to
// be for the host, and 32-bit calls (other numbers, other arguments) get
// no rules.
func architectures() []string {
	if runtime.GOARCH == "arm64" {
		return []string{"SCMP_ARCH_AARCH64"}
	}
	return []string{"SCMP_ARCH_X86_64"}
}

// cloneFlagsArg is clone's flags argument (the first, on the
// architectures above).
func cloneFlagsArg() uint { return 0 }
