package main

import (
	"bufio"
	"bytes"
	"context"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeReaper records each reap call.
type fakeReaper struct {
	mu    sync.Mutex
	calls [][]filterSet
}

func (f *fakeReaper) reap(_ context.Context, sets []filterSet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, sets)
	return nil
}

func (f *fakeReaper) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// lockedBuffer lets the test read logs while the server may still write them.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	addr   string
	done   chan error
	reaper *fakeReaper
	logs   *lockedBuffer
	cancel context.CancelFunc
}

func startServer(t *testing.T, connectionTimeout, reconnectionTimeout time.Duration) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{
		addr:   ln.Addr().String(),
		done:   make(chan error, 1),
		reaper: &fakeReaper{},
		logs:   &lockedBuffer{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	t.Cleanup(cancel)

	srv := newServer(connectionTimeout, reconnectionTimeout, ts.reaper, log.New(ts.logs, "reaper: ", 0))
	go func() { ts.done <- srv.serve(ctx, ln) }()
	return ts
}

func (ts *testServer) waitDone(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("server still running after %s; logs:\n%s", within, ts.logs)
	}
}

func (ts *testServer) assertRunning(t *testing.T, period time.Duration) {
	t.Helper()
	select {
	case <-ts.done:
		t.Fatalf("server exited early; logs:\n%s", ts.logs)
	case <-time.After(period):
	}
}

type client struct {
	conn   net.Conn
	reader *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn: conn, reader: bufio.NewReader(conn)}
}

// send writes raw (which may hold several lines) and returns one reply per line.
func (c *client) send(t *testing.T, raw string) []string {
	t.Helper()
	if _, err := c.conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	var replies []string
	for range strings.Count(raw, "\n") {
		reply, err := c.reader.ReadString('\n')
		if err != nil {
			t.Fatalf("reading reply: %v", err)
		}
		replies = append(replies, reply)
	}
	return replies
}

func TestServerPrintsStartedLine(t *testing.T) {
	ts := startServer(t, 50*time.Millisecond, time.Second)
	ts.waitDone(t, 2*time.Second)
	first, _, _ := strings.Cut(ts.logs.String(), "\n")
	if !strings.HasPrefix(first, "reaper: listening on :") || !strings.HasSuffix(first, " Started!") {
		t.Errorf("first log line = %q, want \"reaper: listening on :<port> Started!\"", first)
	}
}

func TestServerRepliesPerLine(t *testing.T) {
	ts := startServer(t, time.Second, 50*time.Millisecond)
	c := dial(t, ts.addr)

	replies := c.send(t, "label=a=b\r\nlabel=c=d&label=e=f\nnot%zz\nlabel=a=b\n")
	want := []string{"ACK\n", "ACK\n", "ERR invalid filter: invalid URL escape \"%zz\"\n", "ACK\n"}
	if !slices.Equal(replies, want) {
		t.Fatalf("replies = %q, want %q", replies, want)
	}
	c.conn.Close()
	ts.waitDone(t, 2*time.Second)

	if n := ts.reaper.callCount(); n != 1 {
		t.Fatalf("reap called %d times, want 1", n)
	}
	got := ts.reaper.calls[0]
	wantSets := []filterSet{{"a=b"}, {"c=d", "e=f"}}
	if !slices.EqualFunc(got, wantSets, func(a, b filterSet) bool { return slices.Equal(a, b) }) {
		t.Errorf("reaped sets = %q, want %q", got, wantSets)
	}
}

func TestReapsOnceAfterLastClientLeaves(t *testing.T) {
	const reconnect = 100 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)
	c := dial(t, ts.addr)
	c.send(t, "label=session=1\n")

	left := time.Now()
	c.conn.Close()
	ts.waitDone(t, 2*time.Second)

	if elapsed := time.Since(left); elapsed < reconnect {
		t.Errorf("reaped %s after disconnect, before the %s reconnection timeout", elapsed, reconnect)
	}
	if n := ts.reaper.callCount(); n != 1 {
		t.Errorf("reap called %d times, want 1", n)
	}
}

func TestReconnectCancelsTimer(t *testing.T) {
	const reconnect = 150 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)

	first := dial(t, ts.addr)
	first.send(t, "label=session=1\n")
	first.conn.Close()

	time.Sleep(reconnect / 3)
	second := dial(t, ts.addr)
	second.send(t, "label=session=1\n")

	// Well past the original deadline: the reconnect must have cancelled it.
	ts.assertRunning(t, 2*reconnect)
	if n := ts.reaper.callCount(); n != 0 {
		t.Fatalf("reap called %d times while a client was connected", n)
	}

	second.conn.Close()
	ts.waitDone(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 1 {
		t.Errorf("reap called %d times, want 1", n)
	}
}

func TestWaitsForAllClients(t *testing.T) {
	const reconnect = 50 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)
	a := dial(t, ts.addr)
	b := dial(t, ts.addr)
	a.send(t, "label=x=1\n")
	b.send(t, "label=y=2\n")

	a.conn.Close()
	ts.assertRunning(t, 4*reconnect)

	b.conn.Close()
	ts.waitDone(t, 2*time.Second)
	if n := len(ts.reaper.calls[0]); n != 2 {
		t.Errorf("reaped %d filter sets, want 2", n)
	}
}

func TestNoConnectionExitsWithoutReaping(t *testing.T) {
	ts := startServer(t, 50*time.Millisecond, time.Second)
	ts.waitDone(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 0 {
		t.Errorf("reap called %d times, want 0", n)
	}
}

func TestSignalReapsImmediately(t *testing.T) {
	ts := startServer(t, time.Minute, time.Minute)
	c := dial(t, ts.addr)
	c.send(t, "label=session=1\n")

	ts.cancel()
	ts.waitDone(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 1 {
		t.Errorf("reap called %d times, want 1", n)
	}
}
