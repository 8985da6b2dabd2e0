package main

// The layer: a pass-through of a backing directory whose writes, fsyncs and reads can be slowed down or
// failed, and whose writes that were never fsynced can be dropped at once (a power loss).
//
// Durability model. For each file written through the layer it keeps the size known to be on disk: the
// size it had when the layer first saw it written (a file the layer did not create was durable before), 0
// for a file the layer created, the size at the file's last fsync. A power loss truncates every file to
// that size: what was appended and never fsynced is lost, as in a page cache that never reached the disk.
// Writes in place over bytes already durable are kept, and directory entries are treated as durable (a
// file created and never fsynced is left empty, not removed): Kafka's log segments are append-only, and
// its checkpoint files are written to a temporary file, fsynced and renamed.

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Settings is what the control socket sets; the zero value is a plain pass-through.
type Settings struct {
	WriteBps int64   `json:"write_bps"` // writes take len/write_bps seconds (0: no limit)
	WriteMs  float64 `json:"write_ms"`  // every write waits this long first
	FsyncMs  float64 `json:"fsync_ms"`  // every fsync waits this long first
	Error    string  `json:"error"`     // "", "unwritable", "unreadable" or "corrupt"
}

// Stats counts what went through the layer since it was mounted.
type Stats struct {
	Writes        int64   `json:"writes"`
	WriteBytes    int64   `json:"write_bytes"`
	Fsyncs        int64   `json:"fsyncs"`
	Reads         int64   `json:"reads"`
	Delayed       int64   `json:"delayed"`
	DelayS        float64 `json:"delay_s"`
	Failed        int64   `json:"failed"`
	CorruptReads  int64   `json:"corrupt_reads"`
	Tracked       int     `json:"tracked"`
	UnsyncedBytes int64   `json:"unsynced_bytes"` // written and never fsynced
	Frozen        bool    `json:"frozen"`
	Started       int64   `json:"started"` // when the layer was mounted (Unix ns): a new one starts anew
}

type layer struct {
	backing string
	started int64
	// Every operation holds gate for reading; a power loss takes it for writing, so the operations under
	// way finish before the drop. From then on no operation reaches the backing directory: each waits until
	// powerLossHold has passed since the drop (the broker is killed meanwhile, and logs nothing about a
	// disk that merely went away), then fails with EIO — a process killed while its calls wait on the layer
	// exits only once they are answered.
	gate     sync.RWMutex
	frozen   atomic.Bool
	frozenAt atomic.Int64 // Unix ns
	settings atomic.Pointer[Settings]

	mu      sync.Mutex
	durable map[uint64]int64 // backing inode -> bytes known to be on disk
	written map[uint64]int64 // backing inode -> the end of its furthest write through the layer
	nodes   map[uint64]*node // every inode the kernel was told of, to drop its cached pages

	writes, writeBytes, fsyncs, reads, delayed, delayNs, failed, corruptReads atomic.Int64
}

func newLayer(backing string) *layer {
	l := &layer{backing: backing, started: time.Now().UnixNano(), durable: map[uint64]int64{}, written: map[uint64]int64{}, nodes: map[uint64]*node{}}
	l.settings.Store(&Settings{})
	return l
}

func (l *layer) current() *Settings { return l.settings.Load() }

// set replaces the settings; a read fault drops the kernel's cached pages so reads reach the layer.
func (l *layer) set(s Settings) {
	l.settings.Store(&s)
	if s.Error == "unreadable" || s.Error == "corrupt" {
		l.mu.Lock()
		nodes := make([]*node, 0, len(l.nodes))
		for _, n := range l.nodes {
			nodes = append(nodes, n)
		}
		l.mu.Unlock()
		for _, n := range nodes {
			n.NotifyContent(0, 0)
		}
	}
}

func (l *layer) wait(d time.Duration) {
	if d <= 0 {
		return
	}
	time.Sleep(d)
	l.delayed.Add(1)
	l.delayNs.Add(int64(d))
}

// powerLossHold is how long an operation after a power loss waits before it fails.
const powerLossHold = 5 * time.Second

// enter starts an operation; false (and nothing held) once the layer lost power, after the hold.
func (l *layer) enter() bool {
	l.gate.RLock()
	if l.frozen.Load() {
		l.gate.RUnlock()
		time.Sleep(time.Until(time.Unix(0, l.frozenAt.Load()).Add(powerLossHold)))
		return false
	}
	return true
}

func (l *layer) leave() { l.gate.RUnlock() }

func (l *layer) fail() syscall.Errno {
	l.failed.Add(1)
	return syscall.EIO
}

func (l *layer) unwritable() bool { return l.current().Error == "unwritable" }

// seen records a file's durable size the first time it is written through the layer.
func (l *layer) seen(ino uint64, size func() int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.durable[ino]; !ok {
		l.durable[ino] = size()
	}
}

// wrote records the end of a write.
func (l *layer) wrote(ino uint64, end int64) {
	l.mu.Lock()
	if end > l.written[ino] {
		l.written[ino] = end
	}
	l.mu.Unlock()
}

func (l *layer) markDurable(ino uint64, size int64) {
	l.mu.Lock()
	l.durable[ino] = size
	l.mu.Unlock()
}

// shrunk lowers a file's durable size when it was truncated below it.
func (l *layer) shrunk(ino uint64, size int64) {
	l.mu.Lock()
	if d, ok := l.durable[ino]; ok && size < d {
		l.durable[ino] = size
	}
	l.mu.Unlock()
}

// stats gives the counts; the unsynced bytes only when asked (a walk of the whole backing directory).
func (l *layer) stats(unsyncedToo bool) Stats {
	l.mu.Lock()
	tracked := len(l.durable)
	l.mu.Unlock()
	var unsynced Dropped
	if unsyncedToo {
		unsynced, _ = l.walk(false)
	}
	return Stats{
		Writes: l.writes.Load(), WriteBytes: l.writeBytes.Load(), Fsyncs: l.fsyncs.Load(),
		Reads: l.reads.Load(), Delayed: l.delayed.Load(), DelayS: float64(l.delayNs.Load()) / 1e9,
		Failed: l.failed.Load(), CorruptReads: l.corruptReads.Load(), Tracked: tracked,
		UnsyncedBytes: unsynced.DataBytes, Frozen: l.frozen.Load(), Started: l.started,
	}
}

// node is a loopback node whose files go through the layer.
type node struct {
	fs.LoopbackNode
	l *layer
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
)

func (l *layer) newNode(root *fs.LoopbackRoot, _ *fs.Inode, _ string, st *syscall.Stat_t) fs.InodeEmbedder {
	n := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, l: l}
	l.mu.Lock()
	l.nodes[st.Ino] = n
	l.mu.Unlock()
	return n
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !n.l.enter() {
		return nil, 0, syscall.EIO
	}
	defer n.l.leave()
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{inner: fh.(*fs.LoopbackFile), ino: n.ino(), l: n.l}, fuseFlags, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if !n.l.enter() {
		return nil, nil, 0, syscall.EIO
	}
	defer n.l.leave()
	if n.l.unwritable() {
		return nil, nil, 0, n.l.fail()
	}
	child, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	ino := child.StableAttr().Ino
	n.l.markDurable(ino, 0)
	return child, &file{inner: fh.(*fs.LoopbackFile), ino: ino, l: n.l}, fuseFlags, 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if !n.l.enter() {
		return syscall.EIO
	}
	defer n.l.leave()
	size, resized := in.GetSize()
	if resized && n.l.unwritable() {
		return n.l.fail()
	}
	if w, ok := f.(*file); ok {
		f = w.inner
	}
	if resized {
		n.l.seen(n.ino(), func() int64 { return n.size(ctx, f) })
	}
	if errno := n.LoopbackNode.Setattr(ctx, f, in, out); errno != 0 {
		return errno
	}
	if resized {
		n.l.shrunk(n.ino(), int64(size))
	}
	return 0
}

func (n *node) size(ctx context.Context, f fs.FileHandle) int64 {
	var out fuse.AttrOut
	if n.LoopbackNode.Getattr(ctx, f, &out) != 0 {
		return 0
	}
	return int64(out.Size)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.l.enter() {
		return nil, syscall.EIO
	}
	defer n.l.leave()
	if n.l.unwritable() {
		return nil, n.l.fail()
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if !n.l.enter() {
		return syscall.EIO
	}
	defer n.l.leave()
	if n.l.unwritable() {
		return n.l.fail()
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if !n.l.enter() {
		return syscall.EIO
	}
	defer n.l.leave()
	if n.l.unwritable() {
		return n.l.fail()
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

// file is an open file of the layer.
type file struct {
	inner *fs.LoopbackFile
	ino   uint64
	l     *layer
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
)

func (f *file) size(ctx context.Context) int64 {
	var out fuse.AttrOut
	if f.inner.Getattr(ctx, &out) != 0 {
		return 0
	}
	return int64(out.Size)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !f.l.enter() {
		return 0, syscall.EIO
	}
	defer f.l.leave()
	s := f.l.current()
	if s.Error == "unwritable" {
		return 0, f.l.fail()
	}
	delay := time.Duration(s.WriteMs * float64(time.Millisecond))
	if s.WriteBps > 0 {
		delay += time.Duration(int64(len(data)) * int64(time.Second) / s.WriteBps)
	}
	f.l.wait(delay)
	f.l.seen(f.ino, func() int64 { return f.size(ctx) })
	n, errno := f.inner.Write(ctx, data, off)
	f.l.wrote(f.ino, off+int64(n))
	f.l.writes.Add(1)
	f.l.writeBytes.Add(int64(n))
	return n, errno
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if !f.l.enter() {
		return syscall.EIO
	}
	defer f.l.leave()
	s := f.l.current()
	if s.Error == "unwritable" {
		return f.l.fail()
	}
	f.l.wait(time.Duration(s.FsyncMs * float64(time.Millisecond)))
	if errno := f.inner.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	f.l.fsyncs.Add(1)
	f.l.markDurable(f.ino, f.size(ctx))
	return 0
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !f.l.enter() {
		return nil, syscall.EIO
	}
	defer f.l.leave()
	f.l.reads.Add(1)
	switch f.l.current().Error {
	case "unreadable":
		return nil, f.l.fail()
	case "corrupt":
		res, errno := f.inner.Read(ctx, buf, off)
		if errno != 0 {
			return nil, errno
		}
		data, status := res.Bytes(buf)
		res.Done()
		if !status.Ok() {
			return nil, syscall.EIO
		}
		out := append([]byte(nil), data...)
		for i := 0; i < len(out); i += 97 { // a flipped byte in every stretch a CRC covers
			out[i] ^= 0xff
		}
		if len(out) > 0 {
			f.l.corruptReads.Add(1)
		}
		return fuse.ReadResultData(out), 0
	}
	return f.inner.Read(ctx, buf, off)
}

func (f *file) Flush(ctx context.Context) syscall.Errno   { return f.inner.Flush(ctx) }
func (f *file) Release(ctx context.Context) syscall.Errno { return f.inner.Release(ctx) }

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.inner.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.inner.Setattr(ctx, in, out)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if !f.l.enter() {
		return syscall.EIO
	}
	defer f.l.leave()
	if f.l.unwritable() {
		return f.l.fail()
	}
	f.l.seen(f.ino, func() int64 { return f.size(ctx) })
	return f.inner.Allocate(ctx, off, size, mode)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.inner.Lseek(ctx, off, whence)
}
