// Command reaper is a Ryuk-compatible resource reaper for one run: it is
// started with the run's label (CHAOS_REAPER_LABEL=key=value), accepts one
// client registering exactly that label filter over TCP, and once that client
// has been gone for RYUK_RECONNECTION_TIMEOUT removes the containers and
// networks carrying the label. It never removes volumes (a container's
// anonymous volumes go with it).
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
	label               string // the run's "key=value": the only filter accepted and reaped
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
	srv := newServer(filterSet{cfg.label}, cfg.connectionTimeout, cfg.reconnectionTimeout, docker, logger)
	if err := srv.serve(ctx, ln); err != nil {
		logger.Printf("reap incomplete: %v", err)
	}
	return 0
}

// configFromEnv reads the Ryuk-compatible environment variables and the run's label.
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
	cfg.label = getenv("CHAOS_REAPER_LABEL")
	if err = checkRunLabel(cfg.label); err != nil {
		return config{}, fmt.Errorf("CHAOS_REAPER_LABEL: %w (set it to the run's label, e.g. chaos-harness=<run id>)", err)
	}
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
