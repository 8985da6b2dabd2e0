package main

import (
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := configFromEnv(envMap(map[string]string{"CHAOS_REAPER_LABEL": "chaos-harness=r1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		label:               "chaos-harness=r1",
		port:                "8080",
		connectionTimeout:   60 * time.Second,
		reconnectionTimeout: 10 * time.Second,
		dockerSocket:        "/var/run/docker.sock",
	}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
}

func TestConfigFromEnv(t *testing.T) {
	cfg, err := configFromEnv(envMap(map[string]string{
		"RYUK_PORT":                 "9999",
		"RYUK_CONNECTION_TIMEOUT":   "2m",
		"RYUK_RECONNECTION_TIMEOUT": "1500ms",
		"DOCKER_HOST":               "unix:///run/user/1000/docker.sock",
		"HOSTNAME":                  "0123456789ab",
		"CHAOS_REAPER_LABEL":        "chaos-harness=r2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		port:                "9999",
		connectionTimeout:   2 * time.Minute,
		reconnectionTimeout: 1500 * time.Millisecond,
		dockerSocket:        "/run/user/1000/docker.sock",
		selfID:              "0123456789ab",
		label:               "chaos-harness=r2",
	}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
}

func TestConfigRejectsInvalid(t *testing.T) {
	for _, env := range []map[string]string{
		{"RYUK_PORT": "http"},
		{"RYUK_PORT": "70000"},
		{"RYUK_CONNECTION_TIMEOUT": "10"},
		{"RYUK_RECONNECTION_TIMEOUT": "-1s"},
		{"CHAOS_REAPER_LABEL": ""},
		{"CHAOS_REAPER_LABEL": "chaos-harness"},
	} {
		if _, ok := env["CHAOS_REAPER_LABEL"]; !ok {
			env["CHAOS_REAPER_LABEL"] = "chaos-harness=r1"
		}
		if _, err := configFromEnv(envMap(env)); err == nil {
			t.Errorf("configFromEnv(%v) succeeded, want error", env)
		}
	}
}

func TestSocketPath(t *testing.T) {
	for host, want := range map[string]string{
		"":                        "/var/run/docker.sock",
		"unix:///tmp/docker.sock": "/tmp/docker.sock",
		"tcp://127.0.0.1:2375":    "/var/run/docker.sock",
		"unix://":                 "/var/run/docker.sock",
		"npipe:////./pipe/docker": "/var/run/docker.sock",
	} {
		if got := socketPath(host); got != want {
			t.Errorf("socketPath(%q) = %q, want %q", host, got, want)
		}
	}
}
