// Package docker is the sandbox.Driver for the Docker Engine API: it creates,
// starts, stops and removes hardened sandbox containers and their workspace
// volumes, and pulls and inspects their images.
//
// It speaks the API through github.com/moby/moby/client, the successor of the
// frozen github.com/docker/docker module. That client defaults to the newest
// API version it knows; the driver lets it negotiate down on the first
// request instead, because the engines the hub runs on are as old as 20.10
// (API 1.41) and would refuse a newer version outright.
//
// API 1.41 shapes two choices:
//
//   - No image-type mounts and no tmpfs options (size, mode) in the mount
//     API, so /tmp and HOME are tmpfs mounts given in HostConfig.Tmpfs,
//     whose option string the engine passes through to the kernel:
//     exec (tmpfs is noexec by default), a size (unsized by default),
//     mode 1777 for /tmp and mode 0700 with uid=1000,gid=1000 for HOME.
//     The uid and gid options are honoured by this path on 20.10.
//   - No volume subpaths, so the workspace volume's root is the directory
//     the sandbox's user must own.
//
// Why the workspace needs care: a new named volume's root is root-owned 0755
// unless the image has the mount path, in which case the engine copies that
// directory (with its owner) into the empty volume when the container is
// created; an image without /workspace still gets a root-owned one, because
// the working directory is created as root before the copy. The sandbox
// runs as uid 1000 with every capability dropped, so nothing inside can
// chown it. The obvious fix, copying a tar whose "./" entry is owned by
// 1000 into /workspace with the archive API, does nothing: the engine
// skips the root entry of an archive it extracts. So Create does it in two
// containers, neither of which runs anything:
//
//  1. a short-lived helper container of the same image with the volume at
//     /workspace (the engine's copy-up brings in the image's /workspace
//     content, if any) and a writable root, into whose "/" the archive API
//     extracts a "workspace/" directory entry owned by 1000:1000 with mode
//     0755 — which chowns the mount point, that is the volume's root; the
//     helper is removed at once;
//  2. the sandbox container, mounting the volume with copy-up turned off
//     (NoCopy), because copy-up into a still-empty volume would copy the
//     root-owned /workspace back over it.
//
// The archive API cannot do this on the sandbox container itself: it
// refuses any path outside a volume when the root filesystem is read-only.
//
// Two more things the engine would do unasked: give the container its
// image's labels, so Create sets every hub label (ai.devdepot.agentd.*)
// the image carries and the spec does not to "" (an image must not make a
// sandbox look warm or another hub's); and run the image's healthcheck,
// which Create turns off.
//
// A workspace with a size (Limits.WorkspaceBytes) is an ext4 image in the
// driver's WorkspaceDir on a loop device the driver attaches, mounted by
// the engine's local volume driver (type ext4, the device a symlink the
// driver owns): writes past its size fail with ENOSPC inside, and the
// host's disk holds at most the size. The local driver mounts with
// mount(2), so its "o=loop" cannot do this, and a quota on the engine's
// disk depends on its file system (xfs project quotas); a loop device works
// on any backing store, but needs root and the engine on this host.
// Removing the volume detaches the device and deletes the image;
// RecoverWorkspaces does what a crash or a reboot left undone.
//
// Everything else in the spec is carried out as given, or not at all: an
// engine warning at create (a limit it would discard, say) fails Create,
// and Create removes whatever it made when it fails half way.
package docker
