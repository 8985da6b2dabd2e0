package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
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
	noConnection shutdownReason = iota // nobody connected in time: exit without reaping
	allGone                            // last client left and did not come back
	signalled                          // SIGTERM/SIGINT
)

type server struct {
	connectionTimeout   time.Duration
	reconnectionTimeout time.Duration
	reaper              reaper
	filters             *filterStore
	log                 *log.Logger
}

func newServer(connectionTimeout, reconnectionTimeout time.Duration, r reaper, logger *log.Logger) *server {
	return &server{
		connectionTimeout:   connectionTimeout,
		reconnectionTimeout: reconnectionTimeout,
		reaper:              r,
		filters:             newFilterStore(),
		log:                 logger,
	}
}

// serve accepts clients on ln until the lifecycle ends, then closes ln and
// reaps unless no client ever connected. It returns the reap error, if any.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	s.log.Printf("listening on :%d Started!", listenPort(ln))

	// Each accepted connection sends +1, each closed one -1.
	conns := make(chan int)
	stop := make(chan struct{})
	go s.acceptLoop(ln, conns, stop)

	reason := s.awaitShutdown(ctx, conns)
	close(stop)
	ln.Close()

	switch reason {
	case noConnection:
		s.log.Printf("no connection within %s, exiting without reaping", s.connectionTimeout)
		return nil
	case signalled:
		s.log.Printf("signal received, reaping")
	default:
		s.log.Printf("no clients for %s, reaping", s.reconnectionTimeout)
	}
	// ctx may already be cancelled by the signal; reaping must still run.
	return s.reaper.reap(context.Background(), s.filters.snapshot())
}

// awaitShutdown tracks open connections and the two timeouts.
func (s *server) awaitShutdown(ctx context.Context, conns <-chan int) shutdownReason {
	firstConn := time.NewTimer(s.connectionTimeout)
	defer firstConn.Stop()
	firstConnC := firstConn.C

	// Channels are set to nil when their timer is stopped, so a stale tick
	// can never be observed regardless of the runtime's timer semantics.
	var idle *time.Timer
	var idleC <-chan time.Time
	open := 0

	for {
		select {
		case delta := <-conns:
			open += delta
			switch {
			case delta > 0:
				firstConnC = nil
				if idle != nil {
					idle.Stop()
					idle, idleC = nil, nil
				}
			case open == 0:
				idle = time.NewTimer(s.reconnectionTimeout)
				idleC = idle.C
			}
		case <-firstConnC:
			return noConnection
		case <-idleC:
			return allGone
		case <-ctx.Done():
			if idle != nil {
				idle.Stop()
			}
			return signalled
		}
	}
}

func (s *server) acceptLoop(ln net.Listener, conns chan<- int, stop <-chan struct{}) {
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
		// Register before reading any line, so the lifecycle never reaps
		// while a client it has not counted is talking to us.
		if !notify(conns, +1, stop) {
			conn.Close()
			return
		}
		go func() {
			s.handleConn(conn)
			notify(conns, -1, stop)
		}()
	}
}

// notify sends delta unless the lifecycle has already ended.
func notify(conns chan<- int, delta int, stop <-chan struct{}) bool {
	select {
	case conns <- delta:
		return true
	case <-stop:
		return false
	}
}

func (s *server) handleConn(conn net.Conn) {
	defer conn.Close()
	s.log.Printf("client connected: %s", conn.RemoteAddr())
	defer s.log.Printf("client disconnected: %s", conn.RemoteAddr())

	scanner := bufio.NewScanner(conn)
	scanner.Buffer(make([]byte, 4096), maxLineBytes)
	for scanner.Scan() {
		if _, err := io.WriteString(conn, s.handleLine(scanner.Text())); err != nil {
			return
		}
	}
	if err := scanner.Err(); err != nil {
		s.log.Printf("client %s: %v", conn.RemoteAddr(), err)
	}
}

// handleLine registers one filter line and returns the protocol reply.
func (s *server) handleLine(line string) string {
	set, err := parseFilterLine(line)
	if err != nil {
		return "ERR " + err.Error() + "\n"
	}
	if s.filters.add(set) {
		s.log.Printf("registered filter %s", set)
	}
	return "ACK\n"
}

func listenPort(ln net.Listener) int {
	if addr, ok := ln.Addr().(*net.TCPAddr); ok {
		return addr.Port
	}
	return 0
}
