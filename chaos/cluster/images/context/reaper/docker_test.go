package main

import (
	"context"
	"encoding/json"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const selfID = "5e1f00000000"

type fakeObject struct {
	id     string
	labels map[string]string
}

// matches applies Docker's label filter semantics: every term must hold.
func (o fakeObject) matches(terms []string) bool {
	for _, term := range terms {
		key, value, hasValue := strings.Cut(term, "=")
		got, ok := o.labels[key]
		if !ok || (hasValue && got != value) {
			return false
		}
	}
	return true
}

// fakeDocker is a minimal Docker Engine API holding objects in memory.
type fakeDocker struct {
	t          *testing.T
	mu         sync.Mutex
	containers []fakeObject
	networks   []fakeObject
	volumes    []fakeObject
	gone       map[string]bool // listed, but DELETE answers 404
	busy       map[string]int  // DELETE answers 409 this many times first
	deletes    []string        // "DELETE /path?query" in call order
	filters    []string        // raw filters query values in call order
}

func (f *fakeDocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path, ok := strings.CutPrefix(r.URL.Path, "/v1.41")
	if !ok {
		http.Error(w, `{"message":"unsupported API version"}`, http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodDelete {
		f.serveDelete(w, r, path)
		return
	}
	f.filters = append(f.filters, r.URL.Query().Get("filters"))
	switch path {
	case "/containers/json":
		if r.URL.Query().Get("all") != "1" {
			f.t.Errorf("container list without all=1: %s", r.URL)
		}
		f.writeList(w, r, f.containers, func(o fakeObject) any { return map[string]string{"Id": o.id} })
	case "/networks":
		f.writeList(w, r, f.networks, func(o fakeObject) any { return map[string]string{"Id": o.id, "Name": "net-" + o.id} })
	case "/volumes":
		f.t.Errorf("the reaper listed volumes: %s", r.URL)
		json.NewEncoder(w).Encode(map[string]any{"Volumes": nil, "Warnings": nil})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeDocker) writeList(w http.ResponseWriter, r *http.Request, objects []fakeObject, render func(fakeObject) any) {
	out := []any{}
	for _, o := range f.matching(w, r, objects) {
		out = append(out, render(o))
	}
	json.NewEncoder(w).Encode(out)
}

func (f *fakeDocker) matching(w http.ResponseWriter, r *http.Request, objects []fakeObject) []fakeObject {
	var filters map[string][]string
	if err := json.Unmarshal([]byte(r.URL.Query().Get("filters")), &filters); err != nil {
		f.t.Errorf("bad filters in %s: %v", r.URL, err)
	}
	var out []fakeObject
	for _, o := range objects {
		if o.matches(filters["label"]) {
			out = append(out, o)
		}
	}
	return out
}

func (f *fakeDocker) serveDelete(w http.ResponseWriter, r *http.Request, path string) {
	call := "DELETE " + path
	if r.URL.RawQuery != "" {
		call += "?" + r.URL.RawQuery
	}
	f.deletes = append(f.deletes, call)

	if strings.HasPrefix(path, "/volumes/") {
		f.t.Errorf("the reaper removed a volume: %s", call)
	}
	id := path[strings.LastIndex(path, "/")+1:]
	switch {
	case f.gone[id]:
		http.Error(w, `{"message":"no such object"}`, http.StatusNotFound)
	case f.busy[id] > 0:
		f.busy[id]--
		http.Error(w, `{"message":"network has active endpoints"}`, http.StatusConflict)
	default:
		f.gone[id] = true
		w.WriteHeader(http.StatusNoContent)
	}
}

// startFakeDocker serves f on a unix socket and returns a client bound to it.
func startFakeDocker(t *testing.T, f *fakeDocker) (*dockerClient, *lockedBuffer) {
	t.Helper()
	f.t = t
	if f.gone == nil {
		f.gone = map[string]bool{}
	}
	if f.busy == nil {
		f.busy = map[string]int{}
	}
	socket := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	logs := &lockedBuffer{}
	client := newDockerClient(socket, selfID, log.New(logs, "reaper: ", 0))
	client.backoff = time.Millisecond
	return client, logs
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for _, term := range kv {
		k, v, _ := strings.Cut(term, "=")
		m[k] = v
	}
	return m
}

// The labelled volumes stay: fakeDocker fails the test on any volume request.
func TestReapRemovesMatchingResources(t *testing.T) {
	selfFull := selfID + strings.Repeat("0", 52)
	f := &fakeDocker{
		containers: []fakeObject{
			{id: selfFull, labels: labels("session=1")},
			{id: "c1", labels: labels("session=1")},
			{id: "c2", labels: labels("session=1", "other=x")},
			{id: "c3", labels: labels("session=2")},
			{id: "c4", labels: labels("session=1")},
			{id: "c5", labels: labels("other=x")}, // matches only part of the AND set
		},
		networks: []fakeObject{{id: "n1", labels: labels("session=1")}},
		volumes: []fakeObject{
			{id: "vol 1", labels: labels("session=1")},
			{id: "vol2", labels: labels("session=2")},
		},
		gone: map[string]bool{"c4": true},
		busy: map[string]int{"n1": 2},
	}
	client, logs := startFakeDocker(t, f)

	sets := []filterSet{{"session=1"}, {"other=x", "session=1"}}
	if err := client.reap(context.Background(), sets); err != nil {
		t.Fatalf("reap: %v", err)
	}

	wantDeletes := []string{
		"DELETE /containers/c1?force=1&v=1",
		"DELETE /containers/c2?force=1&v=1",
		"DELETE /containers/c4?force=1&v=1",
		"DELETE /networks/n1",
		"DELETE /networks/n1",
		"DELETE /networks/n1",
	}
	if !slices.Equal(f.deletes, wantDeletes) {
		t.Errorf("DELETE calls:\n got %q\nwant %q", f.deletes, wantDeletes)
	}

	wantFilters := []string{`{"label":["session=1"]}`, `{"label":["other=x","session=1"]}`}
	wantAll := slices.Concat(wantFilters, wantFilters) // containers, networks; never volumes
	if !slices.Equal(f.filters, wantAll) {
		t.Errorf("filters sent:\n got %q\nwant %q", f.filters, wantAll)
	}

	if !strings.Contains(logs.String(), "reaper: removed 2 containers, 1 networks\n") {
		t.Errorf("summary line missing; logs:\n%s", logs)
	}
	for _, line := range []string{"removed container c1", "removed network net-n1"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log line %q missing; logs:\n%s", line, logs)
		}
	}
}

func TestReapGivesUpOnStuckNetwork(t *testing.T) {
	f := &fakeDocker{
		networks: []fakeObject{{id: "n1", labels: labels("session=1")}},
		busy:     map[string]int{"n1": 1000},
	}
	client, _ := startFakeDocker(t, f)

	err := client.reap(context.Background(), []filterSet{{"session=1"}})
	if err == nil || !strings.Contains(err.Error(), "active endpoints") {
		t.Fatalf("reap error = %v, want the Docker message", err)
	}
	if got := len(f.deletes); got != removeAttempts {
		t.Errorf("network DELETE attempted %d times, want %d", got, removeAttempts)
	}
}

func TestIsSelfNeedsContainerIDHostname(t *testing.T) {
	full := "5e1f00000000" + strings.Repeat("a", 52)
	for hostname, want := range map[string]bool{
		"5e1f00000000": true,
		"":             false,
		"5e1f":         false, // too short to be a container id
		"5e1f0000000g": false, // not hex: an ordinary hostname
	} {
		d := &dockerClient{selfID: hostname}
		if got := d.isSelf(full); got != want {
			t.Errorf("isSelf with HOSTNAME %q = %v, want %v", hostname, got, want)
		}
	}
}

func TestReapWithoutFiltersCallsNothing(t *testing.T) {
	f := &fakeDocker{containers: []fakeObject{{id: "c1"}}}
	client, logs := startFakeDocker(t, f)

	if err := client.reap(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(f.filters)+len(f.deletes) != 0 {
		t.Errorf("unexpected API calls: lists %q, deletes %q", f.filters, f.deletes)
	}
	want := "reaper: removed 0 containers, 0 networks\n"
	if logs.String() != want {
		t.Errorf("logs = %q, want %q", logs, want)
	}
}

func TestReapReportsUnreachableDocker(t *testing.T) {
	client := newDockerClient(filepath.Join(t.TempDir(), "missing.sock"), "", log.New(&lockedBuffer{}, "", 0))
	err := client.reap(context.Background(), []filterSet{{"session=1"}})
	if err == nil {
		t.Fatal("reap succeeded without a Docker socket")
	}
}
