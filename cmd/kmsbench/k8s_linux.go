package main

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// socketOwner returns the process ID of the process that listens on the
// Unix socket at path: the peer's credentials of a connection to it
// (SO_PEERCRED), which the kernel took when that process listened.
func socketOwner(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred    *syscall.Ucred
		credErr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	if cred.Pid <= 0 {
		return 0, errors.New("it runs outside this process's PID namespace")
	}
	return int(cred.Pid), nil
}
