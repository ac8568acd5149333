package scan

// statSocketAllocFree: StatSocket allocates nothing for a socket here,
// where lstatAt makes the system call itself.
const statSocketAllocFree = sysFstatat != 0
