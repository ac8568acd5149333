package main

import "golang.org/x/sys/unix"

// sysFstatat is the number of the fstatat system call, called newfstatat
// on amd64.
const sysFstatat = unix.SYS_NEWFSTATAT
