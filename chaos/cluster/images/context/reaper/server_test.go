package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
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

// runLabel is the label every test server is started with.
const runLabel = "session=1"

type testServer struct {
	addr   string
	done   chan error
	reaper *fakeReaper
	logs   *lockedBuffer
	cancel context.CancelFunc
}

// startServer serves runLabel; lineTimeout bounds a connection that registers nothing.
func startServer(t *testing.T, connectionTimeout, reconnectionTimeout time.Duration) *testServer {
	t.Helper()
	return startServerWith(t, connectionTimeout, reconnectionTimeout, time.Minute)
}

func startServerWith(t *testing.T, connectionTimeout, reconnectionTimeout, lineTimeout time.Duration) *testServer {
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

	srv := newServer(filterSet{runLabel}, connectionTimeout, reconnectionTimeout, ts.reaper, log.New(ts.logs, "reaper: ", 0))
	srv.lineTimeout = lineTimeout
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

// assertReapedOnlyRunLabel checks one reap call, of exactly the run's label.
func (ts *testServer) assertReapedOnlyRunLabel(t *testing.T) {
	t.Helper()
	if n := ts.reaper.callCount(); n != 1 {
		t.Fatalf("reap called %d times, want 1; logs:\n%s", n, ts.logs)
	}
	got := ts.reaper.calls[0]
	if len(got) != 1 || !slices.Equal(got[0], filterSet{runLabel}) {
		t.Errorf("reaped sets = %q, want only [%s]", got, runLabel)
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

// assertClosed checks that the server has closed the connection.
func (c *client) assertClosed(t *testing.T, within time.Duration) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(within))
	if extra, err := c.reader.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("connection still open (read %q, %v), want it closed by the server", extra, err)
	}
}

func TestServerPrintsStartedLine(t *testing.T) {
	ts := startServer(t, 50*time.Millisecond, time.Second)
	ts.waitDone(t, 2*time.Second)
	first, _, _ := strings.Cut(ts.logs.String(), "\n")
	if !strings.HasPrefix(first, "reaper: listening on :") || !strings.HasSuffix(first, " Started!") {
		t.Errorf("first log line = %q, want \"reaper: listening on :<port> ... Started!\"", first)
	}
}

func TestOwnerIsReapedOnceAfterLeaving(t *testing.T) {
	const reconnect = 100 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)
	c := dial(t, ts.addr)
	// Ryuk clients may repeat their line; percent-encoding and CRLF are the same filter.
	replies := c.send(t, "label=session=1\nlabel=session%3D1\r\nlabel=session=1&label=session=1\n")
	if want := []string{"ACK\n", "ACK\n", "ACK\n"}; !slices.Equal(replies, want) {
		t.Fatalf("replies = %q, want %q", replies, want)
	}
	ts.assertRunning(t, 2*reconnect) // a registered client holds the run

	left := time.Now()
	c.conn.Close()
	ts.waitDone(t, 2*time.Second)
	if elapsed := time.Since(left); elapsed < reconnect {
		t.Errorf("reaped %s after disconnect, before the %s reconnection timeout", elapsed, reconnect)
	}
	ts.assertReapedOnlyRunLabel(t)
}

func TestForeignFiltersAreRefusedAndClosed(t *testing.T) {
	ts := startServer(t, time.Second, 50*time.Millisecond)
	for line, want := range map[string]string{
		"label=other=x\n":                 "ERR refused filter other=x: this reaper serves only label=session=1\n",
		"label=session=2\n":               "ERR refused filter session=2: this reaper serves only label=session=1\n",
		"label=session\n":                 "ERR refused filter session: this reaper serves only label=session=1\n",
		"label=session=1&label=other=x\n": "ERR refused filter other=x&session=1: this reaper serves only label=session=1\n",
		"label=chaos-harness\n":           "ERR refused filter chaos-harness: this reaper serves only label=session=1\n",
		"not%zz\n":                        "ERR invalid filter: invalid URL escape \"%zz\"\n",
		"name=foo\n":                      "ERR no label filter\n",
	} {
		c := dial(t, ts.addr)
		if got := c.send(t, line); !slices.Equal(got, []string{want}) {
			t.Errorf("reply to %q = %q, want %q", line, got, want)
		}
		c.assertClosed(t, time.Second)
	}
	if !strings.Contains(ts.logs.String(), "refused: ERR refused filter other=x") {
		t.Errorf("refusal not logged; logs:\n%s", ts.logs)
	}

	// Refusals claim nothing: the run's client still registers, and only its label is reaped.
	owner := dial(t, ts.addr)
	if got := owner.send(t, "label=session=1\n"); !slices.Equal(got, []string{"ACK\n"}) {
		t.Fatalf("owner got %q, want ACK", got)
	}
	// A foreign line on the owner's connection is refused and ends it too.
	if got := owner.send(t, "label=other=x\n"); !strings.HasPrefix(got[0], "ERR refused filter other=x") {
		t.Errorf("owner's foreign line answered %q", got)
	}
	owner.assertClosed(t, time.Second)
	ts.waitDone(t, 2*time.Second)
	ts.assertReapedOnlyRunLabel(t)
}

func TestSecondRegistrationIsRefused(t *testing.T) {
	const reconnect = 50 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)
	owner := dial(t, ts.addr)
	owner.send(t, "label=session=1\n")

	second := dial(t, ts.addr)
	got := second.send(t, "label=session=1\n")
	if want := []string{"ERR label=session=1 is already registered by another client\n"}; !slices.Equal(got, want) {
		t.Errorf("second registration answered %q, want %q", got, want)
	}
	second.assertClosed(t, time.Second)
	ts.assertRunning(t, 4*reconnect) // the owner's registration stands

	owner.conn.Close()
	ts.waitDone(t, 2*time.Second)
	ts.assertReapedOnlyRunLabel(t)
}

func TestAnotherConnectionCannotDelayReaping(t *testing.T) {
	const reconnect = 100 * time.Millisecond
	ts := startServer(t, time.Second, reconnect)
	owner := dial(t, ts.addr)
	owner.send(t, "label=session=1\n")
	idle := dial(t, ts.addr) // connected, never registers, stays open

	left := time.Now()
	owner.conn.Close()
	time.Sleep(reconnect / 2)
	// Nobody may register again once the owner has left, not even with the run's label.
	late := dial(t, ts.addr)
	if got := late.send(t, "label=session=1\n"); !strings.HasPrefix(got[0], "ERR ") {
		t.Errorf("registration after the owner left answered %q, want ERR", got)
	}
	ts.waitDone(t, 2*time.Second)
	if elapsed := time.Since(left); elapsed > reconnect+time.Second {
		t.Errorf("reaped %s after the owner left; the idle connection delayed it", elapsed)
	}
	ts.assertReapedOnlyRunLabel(t)
	_ = idle
}

func TestSilentConnectionIsClosed(t *testing.T) {
	const lineTimeout = 100 * time.Millisecond
	ts := startServerWith(t, time.Minute, time.Minute, lineTimeout)
	silent := dial(t, ts.addr)
	silent.assertClosed(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 0 {
		t.Errorf("reap called %d times, want 0", n)
	}
	// The owner is not bound by the line timeout once registered.
	owner := dial(t, ts.addr)
	owner.send(t, "label=session=1\n")
	time.Sleep(3 * lineTimeout)
	if got := owner.send(t, "label=session=1\n"); !slices.Equal(got, []string{"ACK\n"}) {
		t.Errorf("owner after %s answered %q, want ACK", 3*lineTimeout, got)
	}
}

func TestNoConnectionExitsWithoutReaping(t *testing.T) {
	ts := startServer(t, 50*time.Millisecond, time.Second)
	ts.waitDone(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 0 {
		t.Errorf("reap called %d times, want 0", n)
	}
}

func TestOnlyRefusedClientsExitWithoutReaping(t *testing.T) {
	ts := startServer(t, 100*time.Millisecond, time.Second)
	c := dial(t, ts.addr)
	c.send(t, "label=other=x\n")
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
	ts.assertReapedOnlyRunLabel(t)
}

func TestSignalBeforeRegistrationDoesNotReap(t *testing.T) {
	ts := startServer(t, time.Minute, time.Minute)
	ts.cancel()
	ts.waitDone(t, 2*time.Second)
	if n := ts.reaper.callCount(); n != 0 {
		t.Errorf("reap called %d times, want 0", n)
	}
}
