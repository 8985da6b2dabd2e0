// Command reaper is a Ryuk-compatible resource reaper: clients register
// Docker label filters over TCP, and once every client has gone away the
// matching containers, networks and volumes are removed.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const defaultSocket = "/var/run/docker.sock"

type config struct {
	port                string
	connectionTimeout   time.Duration
	reconnectionTimeout time.Duration
	dockerSocket        string
	selfID              string
}

func main() {
	os.Exit(run())
}

func run() int {
	logger := log.New(os.Stdout, "reaper: ", 0)
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		logger.Printf("invalid configuration: %v", err)
		return 2
	}

	ln, err := net.Listen("tcp", ":"+cfg.port)
	if err != nil {
		logger.Printf("listen: %v", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	docker := newDockerClient(cfg.dockerSocket, cfg.selfID, logger)
	srv := newServer(cfg.connectionTimeout, cfg.reconnectionTimeout, docker, logger)
	if err := srv.serve(ctx, ln); err != nil {
		logger.Printf("reap incomplete: %v", err)
	}
	return 0
}

// configFromEnv reads the Ryuk-compatible environment variables.
func configFromEnv(getenv func(string) string) (config, error) {
	cfg := config{
		port:         valueOr(getenv("RYUK_PORT"), "8080"),
		dockerSocket: socketPath(getenv("DOCKER_HOST")),
		selfID:       getenv("HOSTNAME"),
	}
	if n, err := strconv.Atoi(cfg.port); err != nil || n < 1 || n > 65535 {
		return config{}, fmt.Errorf("RYUK_PORT %q is not a valid port", cfg.port)
	}

	var err error
	if cfg.connectionTimeout, err = durationEnv(getenv, "RYUK_CONNECTION_TIMEOUT", "60s"); err != nil {
		return config{}, err
	}
	if cfg.reconnectionTimeout, err = durationEnv(getenv, "RYUK_RECONNECTION_TIMEOUT", "10s"); err != nil {
		return config{}, err
	}
	return cfg, nil
}

func durationEnv(getenv func(string) string, name, fallback string) (time.Duration, error) {
	raw := valueOr(getenv(name), fallback)
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive duration", name, raw)
	}
	return d, nil
}

// socketPath honours DOCKER_HOST only when it names a unix socket; any other
// scheme (tcp://, npipe://) cannot be reached this way, so fall back.
func socketPath(dockerHost string) string {
	if path, ok := strings.CutPrefix(dockerHost, "unix://"); ok && path != "" {
		return path
	}
	return defaultSocket
}

func valueOr(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}
