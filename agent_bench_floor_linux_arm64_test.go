package main

import "golang.org/x/sys/unix"

// sysFstatat is the number of the fstatat system call.
const sysFstatat = unix.SYS_FSTATAT
