package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"time"
)

// maxLineBytes bounds a single protocol line so a bad client cannot exhaust memory.
const maxLineBytes = 64 * 1024

// reaper removes everything matching the registered filter sets.
type reaper interface {
	reap(ctx context.Context, sets []filterSet) error
}

type shutdownReason int

const (
	noRegistration shutdownReason = iota // nobody registered in time (or a signal came first): exit without reaping
	ownerGone                            // the registered client left RYUK_RECONNECTION_TIMEOUT ago
	signalled                            // SIGTERM/SIGINT after a registration
)

// server accepts exactly one registration, of exactly its run's filter.
//
// The first client to send that filter owns the reaper; the reaper reaps
// reconnectionTimeout after the owner's connection closes. Every other
// connection, and every other filter, is refused with an ERR line and closed,
// and a connection that registers nothing is closed after lineTimeout: no
// other client can widen what is reaped, nor hold a connection so that a dead
// run is never reaped. Unlike Ryuk, nobody can register again once the owner
// has left.
type server struct {
	connectionTimeout   time.Duration
	reconnectionTimeout time.Duration
	lineTimeout         time.Duration
	allowed             filterSet
	reaper              reaper
	log                 *log.Logger

	mu      sync.Mutex
	claimed bool // a client has registered; nobody else ever can
}

func newServer(allowed filterSet, connectionTimeout, reconnectionTimeout time.Duration, r reaper, logger *log.Logger) *server {
	return &server{
		connectionTimeout:   connectionTimeout,
		reconnectionTimeout: reconnectionTimeout,
		lineTimeout:         defaultLineTimeout,
		allowed:             allowed,
		reaper:              r,
		log:                 logger,
	}
}

// defaultLineTimeout is how long a connection may stay open without registering.
const defaultLineTimeout = 10 * time.Second

// ownerEvent is sent by the owner's connection: true when it registers, false when it closes.
type ownerEvent bool

// serve accepts clients on ln until the lifecycle ends, then closes ln and
// reaps the run's filter if a client registered it. It returns the reap error, if any.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	s.log.Printf("listening on :%d for label=%s Started!", listenPort(ln), s.allowed)

	events := make(chan ownerEvent)
	stop := make(chan struct{})
	go s.acceptLoop(ln, events, stop)

	reason := s.awaitShutdown(ctx, events)
	close(stop)
	ln.Close()

	switch reason {
	case noRegistration:
		s.log.Printf("no registration of label=%s, exiting without reaping", s.allowed)
		return nil
	case signalled:
		s.log.Printf("signal received, reaping")
	default:
		s.log.Printf("client gone for %s, reaping", s.reconnectionTimeout)
	}
	// ctx may already be cancelled by the signal; reaping must still run.
	return s.reaper.reap(context.Background(), []filterSet{s.allowed})
}

// awaitShutdown follows the owner's registration and departure and the two timeouts.
func (s *server) awaitShutdown(ctx context.Context, events <-chan ownerEvent) shutdownReason {
	firstConn := time.NewTimer(s.connectionTimeout)
	defer firstConn.Stop()
	firstConnC := firstConn.C

	var gone <-chan time.Time
	registered := false
	for {
		select {
		case event := <-events:
			if event {
				registered = true
				firstConnC = nil
			} else {
				gone = time.After(s.reconnectionTimeout)
			}
		case <-firstConnC:
			return noRegistration
		case <-gone:
			return ownerGone
		case <-ctx.Done():
			if !registered {
				return noRegistration
			}
			return signalled
		}
	}
}

func (s *server) acceptLoop(ln net.Listener, events chan<- ownerEvent, stop <-chan struct{}) {
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			s.log.Printf("accept: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go s.handleConn(conn, events, stop)
	}
}

// notify delivers event unless the lifecycle has already ended.
func notify(events chan<- ownerEvent, event ownerEvent, stop <-chan struct{}) bool {
	select {
	case events <- event:
		return true
	case <-stop:
		return false
	}
}

func (s *server) handleConn(conn net.Conn, events chan<- ownerEvent, stop <-chan struct{}) {
	defer conn.Close()
	addr := conn.RemoteAddr()
	s.log.Printf("client connected: %s", addr)
	defer s.log.Printf("client disconnected: %s", addr)

	owner := false
	defer func() {
		if owner {
			notify(events, false, stop)
		}
	}()

	conn.SetReadDeadline(time.Now().Add(s.lineTimeout))
	scanner := bufio.NewScanner(conn)
	scanner.Buffer(make([]byte, 4096), maxLineBytes)
	for scanner.Scan() {
		reply, ok := s.handleLine(scanner.Text(), &owner, events, stop)
		if _, err := io.WriteString(conn, reply); err != nil || !ok {
			if !ok {
				s.log.Printf("client %s refused: %s", addr, reply[:len(reply)-1])
			}
			return
		}
		if owner {
			conn.SetReadDeadline(time.Time{}) // the owner holds its connection for the run's lifetime
		}
	}
	if err := scanner.Err(); err != nil {
		s.log.Printf("client %s: %v", addr, err)
	}
}

// handleLine answers one protocol line; ok=false means the connection is to be closed.
// Only the run's own filter is accepted, and only from the first client to send it.
func (s *server) handleLine(line string, owner *bool, events chan<- ownerEvent, stop <-chan struct{}) (string, bool) {
	set, err := parseFilterLine(line)
	if err != nil {
		return "ERR " + err.Error() + "\n", false
	}
	if !slices.Equal(set, s.allowed) {
		return "ERR refused filter " + set.String() + ": this reaper serves only label=" + s.allowed.String() + "\n", false
	}
	if *owner {
		return "ACK\n", true
	}
	if !s.claim() {
		return "ERR label=" + s.allowed.String() + " is already registered by another client\n", false
	}
	// ACK only once the lifecycle has counted the registration: a client
	// that got ACK is never racing a shutdown that ignores it.
	if !notify(events, true, stop) {
		return "ERR the reaper is shutting down\n", false
	}
	*owner = true
	s.log.Printf("registered filter label=%s", s.allowed)
	return "ACK\n", true
}

// claim takes the single registration slot and reports whether it was free.
func (s *server) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return false
	}
	s.claimed = true
	return true
}

func listenPort(ln net.Listener) int {
	if addr, ok := ln.Addr().(*net.TCPAddr); ok {
		return addr.Port
	}
	return 0
}
