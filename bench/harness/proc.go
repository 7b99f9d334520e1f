package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procStat is what the harness reads from /proc/<pid>/stat.
type procStat struct {
	ppid int
	// cpu is utime + stime of the process (all its threads).
	cpu time.Duration
	// children is cutime + cstime: the CPU of children it has reaped.
	children time.Duration
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	num := func(field int) int64 {
		v, _ := strconv.ParseInt(f[field-3], 10, 64)
		return v
	}
	return procStat{
		ppid:     int(num(4)),
		cpu:      time.Duration(num(14)+num(15)) * clockTick,
		children: time.Duration(num(16)+num(17)) * clockTick,
	}, nil
}

// ProcCPU is the CPU time (user + system) pid has used so far.
func ProcCPU(pid int) time.Duration {
	st, err := readStat(pid)
	if err != nil {
		return 0
	}
	return st.cpu
}

// TreeCPU is the CPU time of pid, of its live children and of the children
// it has reaped: the whole PostgreSQL cluster when pid is the postmaster
// (backends are its children; one that exits is added to its cutime).
func TreeCPU(pid int) time.Duration {
	root, err := readStat(pid)
	if err != nil {
		return 0
	}
	total := root.cpu + root.children
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		st, err := readStat(child)
		if err == nil && st.ppid == pid {
			total += st.cpu
		}
	}
	return total
}

// SelfCPU is the CPU time of this process (getrusage, microsecond
// resolution): the load generator's cost.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcRSS is the resident set size of pid in bytes (VmRSS).
func ProcRSS(pid int) int64 { return statusKB(pid, "VmRSS:") * 1024 }

// ProcAnonRSS is the anonymous part of pid's RSS (RssAnon: heap, stacks),
// without the pages of its executable (RssFile), which the kernel shares
// and can drop.
func ProcAnonRSS(pid int) int64 { return statusKB(pid, "RssAnon:") * 1024 }

// ProcPeakRSS is the largest resident set size pid has had (VmHWM).
func ProcPeakRSS(pid int) int64 { return statusKB(pid, "VmHWM:") * 1024 }

func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// PostmasterPID reads the postmaster's pid from a cluster directory.
func PostmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// MachineBusy is the CPU time all processes of the machine have used
// (user, nice, system, irq, softirq, steal from /proc/stat).
func MachineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick
}
