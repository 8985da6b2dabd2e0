// faultfs: the Kafka image's fault layer over a broker's log directory (a FUSE pass-through).
//
//	faultfs mount -backing DIR -mount DIR [-socket PATH]   mount DIR through the layer until killed
//	faultfs ctl [-socket PATH] REQUEST                      send one JSON request, print the JSON reply
//
// Requests: {"op":"stats"}, {"op":"set","settings":{"write_bps":N,"write_ms":N,"fsync_ms":N,"error":E}}
// (E: "", "unwritable", "unreadable", "corrupt"), {"op":"powerloss"}. The reply always carries the stats;
// a power loss's also what it dropped. ctl exits 1 when the reply says ok=false, 2 when none came.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const defaultSocket = "/run/faultfs.sock"

// The parent-death signal is kept by the thread that asks for it: main runs on the main thread.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "mount":
		os.Exit(mountMain(os.Args[2:]))
	case "ctl":
		os.Exit(ctlMain(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: faultfs mount -backing DIR -mount DIR [-socket PATH] | faultfs ctl [-socket PATH] REQUEST")
	os.Exit(2)
}

func mountMain(args []string) int {
	flags := flag.NewFlagSet("mount", flag.ExitOnError)
	backing := flags.String("backing", "", "the directory that holds the data")
	mountpoint := flags.String("mount", "", "where the layer is mounted")
	socket := flags.String("socket", defaultSocket, "the control socket")
	_ = flags.Parse(args)
	if *backing == "" || *mountpoint == "" {
		usage()
	}
	// The layer dies with the broker that started it. A process killed while its calls wait on a FUSE
	// daemon cannot finish exiting until the daemon answers or goes: without this a broker killed during a
	// slow or stuck call would stay a zombie, and its container with it.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: parent-death signal: %v\n", err)
		return 1
	}
	l := newLayer(*backing)
	var st syscall.Stat_t
	if err := syscall.Stat(*backing, &st); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: backing directory %s: %v\n", *backing, err)
		return 1
	}
	root := &fs.LoopbackRoot{Path: *backing, Dev: uint64(st.Dev), NewNode: l.newNode}
	root.RootNode = l.newNode(root, nil, "", &st)
	second := time.Second
	server, err := fs.Mount(*mountpoint, root.RootNode, &fs.Options{
		AttrTimeout:  &second,
		EntryTimeout: &second,
		MountOptions: fuse.MountOptions{
			FsName: "faultfs", Name: "faultfs", AllowOther: true, DirectMountStrict: true,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: mount %s: %v (the container needs /dev/fuse and CAP_SYS_ADMIN)\n", *mountpoint, err)
		return 1
	}
	listener, err := serve(l, *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: control socket %s: %v\n", *socket, err)
		_ = server.Unmount()
		return 1
	}
	defer listener.Close()
	fmt.Printf("faultfs: %s mounted over %s, control %s\n", *mountpoint, *backing, *socket)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		if !l.frozen.Load() {
			_ = server.Unmount()
		}
		os.Exit(0)
	}()
	server.Wait()
	return 0
}
