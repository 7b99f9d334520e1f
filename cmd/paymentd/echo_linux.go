package main

import (
	"syscall"
	"unsafe"
)

// withoutEcho runs read with the terminal's echo off, so a typed password
// does not appear on the screen; it reports false when fd is not a
// terminal (read is then not called).
func withoutEcho(fd uintptr, read func() error) (bool, error) {
	var old syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&old))); e != 0 {
		return false, nil
	}
	quiet := old
	quiet.Lflag &^= syscall.ECHO
	quiet.Lflag |= syscall.ICANON | syscall.ISIG
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&quiet))); e != 0 {
		return false, nil
	}
	defer func() {
		// Best effort: a terminal that cannot be restored is the user's to reset.
		_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	}()
	return true, read()
}
