package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// Dropped is what a power loss (or a dry walk) found beyond the durable sizes: the files cut, the bytes cut
// (a preallocated index counts whole), and of those the bytes that were written (data lost).
type Dropped struct {
	Files     int              `json:"files"`
	Bytes     int64            `json:"bytes"`
	DataBytes int64            `json:"data_bytes"`
	Paths     map[string]int64 `json:"paths"` // data bytes lost, by path under the backing directory
}

const listedPaths = 200

// walk visits every regular file under the backing directory whose size is beyond its durable size;
// truncate cuts each back to it.
func (l *layer) walk(truncate bool) (Dropped, error) {
	l.mu.Lock()
	durable := make(map[uint64]int64, len(l.durable))
	for ino, size := range l.durable {
		durable[ino] = size
	}
	written := make(map[uint64]int64, len(l.written))
	for ino, end := range l.written {
		written[ino] = end
	}
	l.mu.Unlock()
	type drop struct {
		path        string
		bytes, data int64
	}
	var drops []drop
	var firstErr error
	err := filepath.WalkDir(l.backing, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil {
			return nil
		}
		keep, ok := durable[st.Ino]
		if !ok || st.Size <= keep {
			return nil
		}
		if truncate {
			if err := os.Truncate(path, keep); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		rel, _ := filepath.Rel(l.backing, path)
		data := min(st.Size, written[st.Ino]) - keep
		drops = append(drops, drop{rel, st.Size - keep, max(data, 0)})
		return nil
	})
	if firstErr == nil {
		firstErr = err
	}
	sort.Slice(drops, func(i, j int) bool { return drops[i].data > drops[j].data })
	out := Dropped{Files: len(drops), Paths: map[string]int64{}}
	for i, d := range drops {
		out.Bytes += d.bytes
		out.DataBytes += d.data
		if i < listedPaths && d.data > 0 {
			out.Paths[d.path] = d.data
		}
	}
	return out, firstErr
}

// powerLoss waits for the operations under way, drops what was never fsynced, and holds back, then fails,
// every operation from then on (enter). The process that wrote through the layer is to be killed next.
func (l *layer) powerLoss() (Dropped, error) {
	l.gate.Lock()
	defer l.gate.Unlock()
	l.frozenAt.Store(time.Now().UnixNano())
	l.frozen.Store(true)
	return l.walk(true)
}
