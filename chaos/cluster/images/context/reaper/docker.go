package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	apiBase         = "http://docker/v1.41"
	httpTimeout     = 30 * time.Second
	removeAttempts  = 10
	defaultBackoff  = 200 * time.Millisecond
	maxErrorBodyLen = 4096
)

// resource is a Docker object to remove; name is only for logging.
type resource struct {
	id   string
	name string
}

// resourceKind binds how one Docker object type is listed and removed.
type resourceKind struct {
	noun   string
	list   func(context.Context, filterSet) ([]resource, error)
	remove func(context.Context, resource) (bool, error)
}

// dockerClient talks to the Docker Engine API over its unix socket.
type dockerClient struct {
	http    *http.Client
	selfID  string
	log     *log.Logger
	backoff time.Duration // wait before retry n is n*backoff
}

func newDockerClient(socket, selfID string, logger *log.Logger) *dockerClient {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &dockerClient{
		http:    &http.Client{Transport: transport, Timeout: httpTimeout},
		selfID:  selfID,
		log:     logger,
		backoff: defaultBackoff,
	}
}

// reap removes containers first (with their anonymous volumes), then networks,
// which cannot be removed while containers still use them. Volumes are never
// listed or removed by label: a label filter must not reach data that outlives
// the run's containers.
func (d *dockerClient) reap(ctx context.Context, sets []filterSet) error {
	var errs []error
	counts := make(map[string]int)
	for _, kind := range d.kinds() {
		n, err := d.reapKind(ctx, kind, sets)
		counts[kind.noun] = n
		errs = append(errs, err)
	}
	d.log.Printf("removed %d containers, %d networks", counts["container"], counts["network"])
	return errors.Join(errs...)
}

func (d *dockerClient) kinds() []resourceKind {
	return []resourceKind{
		{noun: "container", list: d.listContainers, remove: d.removeContainer},
		{noun: "network", list: d.listNetworks, remove: d.withRetry(d.removeNetwork)},
	}
}

// reapKind removes every resource of one kind matching any filter set and
// returns how many were actually removed (not those already gone).
func (d *dockerClient) reapKind(ctx context.Context, kind resourceKind, sets []filterSet) (int, error) {
	var errs []error
	seen := make(map[string]bool)
	removed := 0
	for _, set := range sets {
		items, err := kind.list(ctx, set)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %ss matching %s: %w", kind.noun, set, err))
			continue
		}
		for _, item := range items {
			if seen[item.id] {
				continue
			}
			seen[item.id] = true
			ok, err := kind.remove(ctx, item)
			if err != nil {
				errs = append(errs, fmt.Errorf("remove %s %s: %w", kind.noun, item.name, err))
				d.log.Printf("failed to remove %s %s: %v", kind.noun, item.name, err)
				continue
			}
			if ok {
				removed++
				d.log.Printf("removed %s %s", kind.noun, item.name)
			}
		}
	}
	return removed, errors.Join(errs...)
}

func (d *dockerClient) listContainers(ctx context.Context, set filterSet) ([]resource, error) {
	var containers []struct {
		ID string `json:"Id"`
	}
	query := url.Values{"all": {"1"}}
	if err := d.getJSON(ctx, "/containers/json", set, query, &containers); err != nil {
		return nil, err
	}
	var out []resource
	for _, c := range containers {
		if d.isSelf(c.ID) {
			continue
		}
		out = append(out, resource{id: c.ID, name: shortID(c.ID)})
	}
	return out, nil
}

func (d *dockerClient) listNetworks(ctx context.Context, set filterSet) ([]resource, error) {
	var networks []struct {
		ID   string `json:"Id"`
		Name string `json:"Name"`
	}
	if err := d.getJSON(ctx, "/networks", set, url.Values{}, &networks); err != nil {
		return nil, err
	}
	out := make([]resource, 0, len(networks))
	for _, n := range networks {
		out = append(out, resource{id: n.ID, name: n.Name})
	}
	return out, nil
}

// removeContainer force-removes a container and its anonymous volumes (v=1);
// named volumes it mounts are left alone by Docker.
func (d *dockerClient) removeContainer(ctx context.Context, r resource) (bool, error) {
	return d.delete(ctx, "/containers/"+url.PathEscape(r.id), url.Values{"force": {"1"}, "v": {"1"}})
}

func (d *dockerClient) removeNetwork(ctx context.Context, r resource) (bool, error) {
	return d.delete(ctx, "/networks/"+url.PathEscape(r.id), nil)
}

// isSelf reports whether id is the reaper's own container. Docker sets
// HOSTNAME to the 12-character short id, a prefix of the full id; any other
// hostname (run outside Docker, or --hostname) protects nothing.
func (d *dockerClient) isSelf(id string) bool {
	return looksLikeContainerID(d.selfID) && strings.HasPrefix(id, d.selfID)
}

func looksLikeContainerID(s string) bool {
	if len(s) < 12 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// withRetry retries a removal that may fail while containers are still being
// torn down (e.g. "network has active endpoints").
func (d *dockerClient) withRetry(remove func(context.Context, resource) (bool, error)) func(context.Context, resource) (bool, error) {
	return func(ctx context.Context, r resource) (bool, error) {
		var err error
		for attempt := 1; attempt <= removeAttempts; attempt++ {
			var removed bool
			if removed, err = remove(ctx, r); err == nil {
				return removed, nil
			}
			if attempt == removeAttempts {
				break
			}
			select {
			case <-time.After(time.Duration(attempt) * d.backoff):
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		return false, fmt.Errorf("after %d attempts: %w", removeAttempts, err)
	}
}

// getJSON issues GET path?filters=<set as Docker JSON>&query... and decodes the body.
func (d *dockerClient) getJSON(ctx context.Context, path string, set filterSet, query url.Values, out any) error {
	filters, err := json.Marshal(map[string][]string{"label": set})
	if err != nil {
		return err
	}
	query.Set("filters", string(filters))

	resp, err := d.do(ctx, http.MethodGet, path, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(resp)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// delete removes one object; a 404 means it is already gone, reported as
// (false, nil).
func (d *dockerClient) delete(ctx context.Context, path string, query url.Values) (bool, error) {
	resp, err := d.do(ctx, http.MethodDelete, path, query)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return true, nil
	default:
		return false, apiError(resp)
	}
}

func (d *dockerClient) do(ctx context.Context, method, path string, query url.Values) (*http.Response, error) {
	target := apiBase + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	return d.http.Do(req)
}

// apiError turns a non-success response into an error carrying Docker's message.
func apiError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyLen))
	var msg struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Message != "" {
		return fmt.Errorf("docker API %s: %s", resp.Status, msg.Message)
	}
	return fmt.Errorf("docker API %s: %s", resp.Status, strings.TrimSpace(string(body)))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
