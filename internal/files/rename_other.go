//go:build !linux

package files

// renameNoReplace renames src to dst, failing with an fs.ErrExist error if
// dst exists. Off Linux the check and the rename are two steps.
func renameNoReplace(src, dst string) error {
	return renameCheckFirst(src, dst)
}
