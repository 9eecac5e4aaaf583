package hotpath

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// ProcessCPU is the CPU time (user + system, all threads) process pid has
// used, read from /proc/PID/stat; its resolution is 10 ms.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("hotpath: cpu time of %d: %w", pid, err)
	}
	return parseStat(b)
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// and parentheses itself, so fields are counted from the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("hotpath: /proc stat line without a command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("hotpath: /proc stat line has %d fields after the name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 63)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 63)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("hotpath: /proc stat times: %w", err)
	}
	const maxTicks = uint64(1<<63-1) / uint64(clockTick) / 2
	if ut > maxTicks || st > maxTicks {
		return 0, errors.New("hotpath: /proc stat times out of range")
	}
	return time.Duration(ut+st) * clockTick, nil
}
