package errs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
)

func classifyOS(err error) Kind {
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, fs.ErrNotExist):
		return NotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return Exists
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return Permission
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT),
		errors.Is(err, syscall.EFBIG), errors.Is(err, syscall.ENAMETOOLONG):
		return Exhausted
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		return Precondition
	case errors.Is(err, fs.ErrInvalid), errors.Is(err, syscall.EINVAL):
		return Invalid
	}
	return Unknown
}
