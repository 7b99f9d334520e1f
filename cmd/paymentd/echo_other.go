//go:build !linux

package main

// withoutEcho cannot turn a terminal's echo off on this platform: it
// reports false, and the password is read as typed (use --password-file
// or a pipe).
func withoutEcho(uintptr, func() error) (bool, error) { return false, nil }
