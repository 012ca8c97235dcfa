//go:build !unix

package wstar

func mkfifo(string) error { return nil }
